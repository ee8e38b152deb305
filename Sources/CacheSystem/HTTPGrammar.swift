/// The rule for an HTTP field value that may be stored and sent back in a
/// request header (RFC 9110 section 5.5).
public enum HTTPFieldValue {
    /// True when `value` holds no control character but HTAB (so no CR, LF
    /// or NUL that would end or split a header line) and has no leading or
    /// trailing SP or HTAB.
    public static func isSafe(_ value: some Collection<UInt8>) -> Bool {
        guard let first = value.first else { return true }
        if first == 0x20 || first == 0x09 { return false }
        var last = first
        for b in value {
            if (b < 0x20 && b != 0x09) || b == 0x7F { return false }
            last = b
        }
        return last != 0x20 && last != 0x09
    }

    /// `isSafe` on a string's UTF-8 bytes.
    public static func isSafe(_ value: String) -> Bool { isSafe(value.utf8) }
}
