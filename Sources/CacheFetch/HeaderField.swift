import CacheHTTP
import CacheSystem

/// One response header line, parsed as bytes by RFC 9110 section 5.
///
/// libcurl hands the header callback one raw line at a time, CRLF included.
/// In Swift `"\r\n"` is a single `Character`, so any trim done on `String`
/// characters leaves the line ending in place; this parser works on the
/// bytes, and turns name and value into `String` only at the end.
public struct HeaderField: Sendable, Equatable {
    /// The field name, lowercased (names are case-insensitive).
    public var name: String
    /// The field value without leading or trailing SP and HTAB, and without
    /// the line ending.
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Parses `line` (`name: value` with an optional CRLF or LF ending).
    ///
    /// Returns nil for anything that is not a well-formed field line: a status
    /// line, the blank line ending the block, an obs-fold continuation, a name
    /// that is not an RFC 9110 token, or a value holding a control character
    /// other than HTAB (a bare CR, LF or NUL inside a value is never kept).
    public static func parse(_ line: some Collection<UInt8>) -> HeaderField? {
        var bytes = Array(line)
        // One line ending, CRLF or LF; a CR left before it is part of the value.
        if bytes.last == 0x0A { bytes.removeLast() }
        if bytes.last == 0x0D { bytes.removeLast() }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return nil }
        let name = bytes[..<colon]
        guard HTTPGrammar.isToken(name) else { return nil }
        var start = colon + 1
        var end = bytes.count
        while start < end, HTTPGrammar.isWhitespace(bytes[start]) { start += 1 }
        while end > start, HTTPGrammar.isWhitespace(bytes[end - 1]) { end -= 1 }
        let value = bytes[start..<end]
        guard HTTPGrammar.isFieldValue(value) else { return nil }
        let lowered = name.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
        return HeaderField(name: String(decoding: lowered, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
    }
}
