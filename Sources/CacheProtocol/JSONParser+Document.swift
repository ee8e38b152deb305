import CacheSystem

/// A feed document read without building its items: the array a JSON
/// Pointer names is checked element by element and its elements' byte
/// ranges kept, while the values around it are built as usual. A page of a
/// million posts then costs its bytes and one range per post, not a tree of
/// a million objects (issue 34); each element is parsed alone when it is read.
extension JSONParser {
    /// Parses a whole document and returns it with the byte range of each
    /// element of the array that `path` (a JSON Pointer's tokens) names, so
    /// callers can keep an element's exact text; `ranges` is nil when the
    /// pointer names nothing or something other than an array (the document
    /// says what). That array's elements are checked as strictly as `parse`
    /// checks them but not kept: in `document` it reads as empty, and a
    /// caller parses an element from its range (`parseElement`). A repeated
    /// member is followed as `JSON.subscript` reads it: the last one. An
    /// array at `path` of more than `maxElements` elements stops the parse
    /// there (a feed's items are bounded before they are all read): the
    /// error's `elementLimit` is set.
    public static func parseDocument(_ bytes: some Collection<UInt8>, capturingArrayAt path: [String],
                                     maxDepth: Int = defaultMaxDepth, maxElements: Int = .max) throws(JSONError) -> (document: JSON, ranges: [Range<Int>]?) {
        try withParser(bytes, maxDepth: maxDepth) { (p) throws(JSONError) -> (document: JSON, ranges: [Range<Int>]?) in
            p.maxElements = maxElements
            var ranges: [Range<Int>]?
            p.skipWhitespace()
            let v = try p.valueOnPath(depth: 0, path: path[...], captured: &ranges)
            try p.expectEnd()
            return (v, ranges)
        }
    }

    /// One element of the array `parseDocument` captured at `path`, parsed
    /// from its range under the nesting it had in the document.
    public static func parseElement(_ bytes: some Collection<UInt8>, capturedAt path: [String],
                                    maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSON {
        try parse(bytes, maxDepth: max(maxDepth - path.count - 1, 0))
    }

    /// Checks that `bytes` are one JSON value (surrounding whitespace
    /// allowed) exactly as `parse` would, building nothing.
    public static func validate(_ bytes: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth) throws(JSONError) {
        try withParser(bytes, maxDepth: maxDepth) { (p) throws(JSONError) in
            p.skipWhitespace()
            try p.skipValue(depth: 0)
            try p.expectEnd()
        }
    }

    /// `value(depth:)`, noting the element ranges of the array at `path`
    /// (below this value) in `captured`; that array's elements are checked,
    /// not built.
    mutating func valueOnPath(depth: Int, path: ArraySlice<String>, captured: inout [Range<Int>]?) throws(JSONError) -> JSON {
        guard let b = peek(), b == UInt8(ascii: "{") || b == UInt8(ascii: "[") else {
            if path.isEmpty { captured = nil }
            return try value(depth: depth)
        }
        guard depth < maxDepth else { throw error("nested deeper than \(maxDepth) levels") }
        let isObject = b == UInt8(ascii: "{")
        let capturing = path.isEmpty && !isObject
        let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
        pos += 1
        var pairs: [(String, JSON)] = []
        var items: [JSON] = []
        var ranges: [Range<Int>] = []
        // Where the stop flag was last looked at (`StopFlag.current`): elements and bytes.
        var lookedAt = (items: 0, offset: pos)
        skipWhitespace()
        if peek() == close {
            pos += 1
            if path.isEmpty { captured = isObject ? nil : [] }
            return isObject ? .object([]) : .array([])
        }
        while true {
            skipWhitespace()
            var key = ""
            if isObject {
                guard peek() == UInt8(ascii: "\"") else { throw error("expected a string key") }
                key = try string()
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { throw error("expected ':' after key") }
                pos += 1
                skipWhitespace()
            }
            let start = pos
            if capturing {
                guard ranges.count < maxElements else {
                    throw JSONError(offset: pos, reason: "the array holds more than \(maxElements) elements", elementLimit: maxElements)
                }
                if ranges.count - lookedAt.items >= StopFlag.itemsBetweenLooks || pos - lookedAt.offset >= StopFlag.bytesBetweenLooks {
                    lookedAt = (ranges.count, pos)
                    if StopFlag.current?.isRaised == true { throw stoppedError() }
                }
                try skipValue(depth: depth + 1)
                ranges.append(start..<pos)
            } else {
                try lookAtStopFlag()
                let onPath = !path.isEmpty && (isObject ? key == path.first! : JSONPointer.index(path.first!) == items.count)
                let v = onPath ? try valueOnPath(depth: depth + 1, path: path.dropFirst(), captured: &captured) : try value(depth: depth + 1)
                if isObject { pairs.append((key, v)) } else { items.append(v) }
            }
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): pos += 1
            case close:
                pos += 1
                if path.isEmpty { captured = isObject ? nil : ranges }
                return isObject ? .object(pairs) : .array(items)
            default: throw error(isObject ? "expected ',' or '}' in object" : "expected ',' or ']' in array")
            }
        }
    }

    /// Moves past one value, checking it as `value(depth:)` does.
    mutating func skipValue(depth: Int) throws(JSONError) {
        guard let b = peek() else { throw error("unexpected end of input") }
        switch b {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < maxDepth else { throw error("nested deeper than \(maxDepth) levels") }
            let isObject = b == UInt8(ascii: "{")
            let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
            pos += 1
            skipWhitespace()
            if peek() == close { pos += 1; return }
            while true {
                skipWhitespace()
                if isObject {
                    guard peek() == UInt8(ascii: "\"") else { throw error("expected a string key") }
                    try skipString()
                    skipWhitespace()
                    guard peek() == UInt8(ascii: ":") else { throw error("expected ':' after key") }
                    pos += 1
                    skipWhitespace()
                }
                try lookAtStopFlag()
                try skipValue(depth: depth + 1)
                skipWhitespace()
                switch peek() {
                case UInt8(ascii: ","): pos += 1
                case close: pos += 1; return
                default: throw error(isObject ? "expected ',' or '}' in object" : "expected ',' or ']' in array")
                }
            }
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try skipNumber()
        default: throw error("unexpected character")
        }
    }

    /// Moves past a string, checking it as `string()` does, with the same
    /// error at the same byte: its escapes, no control characters, then its
    /// UTF-8, checked run by run between escapes (an escape is ASCII, so no
    /// UTF-8 sequence spans one) and reported at the closing quote.
    mutating func skipString() throws(JSONError) {
        pos += 1  // opening quote
        var run = pos
        var valid = true
        var escaped = false
        while true {
            guard pos < bytes.count else { throw error("unterminated string") }
            let b = bytes[pos]
            if b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                valid = valid && Self.isUTF8(UnsafeRawBufferPointer(rebasing: bytes[run..<pos]))
                if b == UInt8(ascii: "\"") {
                    // `string()` names the quote itself without escapes, the byte after it with them.
                    if !valid { pos += escaped ? 1 : 0; throw error("invalid UTF-8 in string") }
                    pos += 1
                    return
                }
                pos += 1
                escaped = true
                try skipEscape()
                run = pos
                continue
            }
            if b < 0x20 { throw error("control character in string") }
            pos += 1
        }
    }

    /// Moves past the escape after a backslash, checking it as `string()` does.
    private mutating func skipEscape() throws(JSONError) {
        guard let e = peek() else { throw error("unterminated escape") }
        pos += 1
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
             UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return
        case UInt8(ascii: "u"):
            _ = try unicodeEscape()
        default:
            throw error("invalid escape")
        }
    }

    /// True when `raw` is well-formed UTF-8, checked without building a string.
    static func isUTF8(_ raw: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        // ASCII runs are most of a feed's text: eight bytes at a time.
        while i + 8 <= raw.count, raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 { i += 8 }
        if i == raw.count { return true }
        let rest = UnsafeRawBufferPointer(rebasing: raw[i...]).bindMemory(to: UInt8.self)
        var decoder = Unicode.UTF8.ForwardParser()
        var iterator = rest.makeIterator()
        while true {
            switch decoder.parseScalar(from: &iterator) {
            case .valid: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}
