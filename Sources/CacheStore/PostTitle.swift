/// Where a post's title is in its JSON, found once when the post is stored
/// so that a search compares bytes in place (docs/protocol.md, `list_posts`:
/// a post's title is its `title` member when that is a string, or
/// `title.rendered` (WordPress); without a `title`, its `name` (Lemmy),
/// `record.text` (Bluesky) or `text` (Slack, X)). A title of ASCII without
/// escapes is compared in place, folding ASCII case; any other is decoded
/// and lowercased once (`folded`), as `String.lowercased()` does.
enum PostTitle {
    /// A title's place in its post's bytes: the string's contents, between
    /// its quotes. `length` 0: no title; `folded`: kept apart, decoded.
    struct Ref: Sendable, Equatable {
        var start: UInt16
        var length: UInt16
        static let none = Ref(start: 0, length: 0)
        static let folded = Ref(start: .max, length: .max)
        var isFolded: Bool { self == .folded }
        var range: Range<Int> { Int(start)..<Int(start) + Int(length) }
    }

    enum Located: Equatable {
        case none
        case inPlace(Ref)
        /// The title decoded and lowercased, as UTF-8.
        case folded([UInt8])
    }

    /// The title of the post `json` (a JSON object; anything else has none).
    static func locate(in json: [UInt8]) -> Located {
        json.withUnsafeBytes { locate(in: $0) }
    }

    /// The title of the post whose bytes are `b`.
    static func locate(in b: UnsafeRawBufferPointer) -> Located {
        guard let span = JSONScan(bytes: b).titleSpan() else { return .none }
        return place(span, in: b)
    }

    /// A located title string (with its quotes) as a `Located`.
    private static func place(_ span: Range<Int>, in b: UnsafeRawBufferPointer) -> Located {
        let inner = span.lowerBound + 1..<span.upperBound - 1
        if inner.isEmpty { return .none }
        let plain = !b[inner].contains { $0 == UInt8(ascii: "\\") || $0 >= 0x80 }
        if plain && inner.upperBound < Int(UInt16.max) {
            return .inPlace(Ref(start: UInt16(inner.lowerBound), length: UInt16(inner.count)))
        }
        guard let text = JSONScan.decodeString(UnsafeRawBufferPointer(rebasing: b[span])) else { return .none }
        let folded = Array(text.lowercased().utf8)
        return folded.isEmpty ? .none : .folded(folded)
    }

    /// Whether `haystack` holds `needle` byte for byte.
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        haystack.withUnsafeBytes { h in find(h, needle, fold: false) }
    }

    /// Whether `haystack` (ASCII) holds `needle` (lowercased), folding the
    /// haystack's ASCII capitals.
    static func containsFoldingASCII(_ haystack: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
        find(haystack, needle, fold: true)
    }

    @inline(__always)
    private static func find(_ h: UnsafeRawBufferPointer, _ needle: [UInt8], fold: Bool) -> Bool {
        guard let first = needle.first else { return true }
        guard h.count >= needle.count else { return false }
        @inline(__always) func at(_ i: Int) -> UInt8 {
            let c = h[i]
            return fold && c >= 0x41 && c <= 0x5A ? c | 0x20 : c
        }
        return needle.withUnsafeBufferPointer { n in
            var i = 0
            let last = h.count - n.count
            while i <= last {
                if at(i) == first {
                    var j = 1
                    while j < n.count && at(i + j) == n[j] { j += 1 }
                    if j == n.count { return true }
                }
                i += 1
            }
            return false
        }
    }
}
