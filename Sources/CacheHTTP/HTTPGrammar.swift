/// The RFC 9110 grammar of HTTP field lines, written once: tokens (field
/// names, methods, parameter names), whitespace and field values. Every
/// reader and writer of HTTP here checks against it: the request parser
/// (`CacheHTTP.HTTPParser`), the response header parser and the configured
/// request headers (`CacheFetch.HeaderField`, `FetchHeader`, `LinkHeader`),
/// and the validators the store keeps to send back (`CacheStore.Validators`).
///
/// `@inlinable`: the request parser calls the byte classes once per byte
/// of every request head.
public enum HTTPGrammar {
    /// RFC 9110 `tchar` (section 5.6.2): a letter, a digit or one of
    /// ``!#$%&'*+-.^_`|~``.
    @inlinable public static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): return true
        default: return false
        }
    }

    /// RFC 9110 `token`: one or more `tchar`.
    @inlinable public static func isToken(_ bytes: some Collection<UInt8>) -> Bool {
        !bytes.isEmpty && bytes.allSatisfy(isTokenByte)
    }

    /// SP or HTAB: the bytes of `OWS` (section 5.6.3), trimmed around a field value.
    @inlinable public static func isWhitespace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 }

    /// A byte a field value may hold (section 5.5): a visible character,
    /// SP, HTAB or obs-text (0x80-0xFF); never NUL, CR, LF, another control
    /// or DEL, any of which could end or split a header line.
    @inlinable public static func isFieldValueByte(_ b: UInt8) -> Bool { b == 0x09 || (b >= 0x20 && b != 0x7F) }

    /// True when `value` is a field value as section 5.5 defines it: field
    /// value bytes only, and no SP or HTAB first or last (it is what is
    /// left once a field line is trimmed, and so may be stored and sent
    /// back in a request header as it is). The empty value is one.
    @inlinable public static func isFieldValue(_ value: some Collection<UInt8>) -> Bool {
        guard let first = value.first else { return true }
        if isWhitespace(first) { return false }
        var last = first
        for b in value {
            if !isFieldValueByte(b) { return false }
            last = b
        }
        return !isWhitespace(last)
    }

    /// `isFieldValue` of a string's UTF-8 bytes.
    public static func isFieldValue(_ value: String) -> Bool { isFieldValue(value.utf8) }
}
