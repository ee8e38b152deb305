/// Byte classes of ASCII text: the one place they are spelled out.
public enum ASCII {
    /// `0`-`9`.
    @inlinable public static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    /// `0`-`9`, `a`-`f`: the digits of the hashes the store names objects by.
    @inlinable public static func isLowercaseHexDigit(_ b: UInt8) -> Bool { isDigit(b) || (b >= 0x61 && b <= 0x66) }

    /// `0`-`9`, `a`-`f`, `A`-`F`.
    @inlinable public static func isHexDigit(_ b: UInt8) -> Bool { isLowercaseHexDigit(b) || (b >= 0x41 && b <= 0x46) }

    /// `A`-`Z`, `a`-`z`.
    @inlinable public static func isLetter(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) }

    /// True when `bytes` are exactly `count` lowercase hex digits (an object's
    /// hash is 32: docs/storage-format.md, "Object names").
    @inlinable public static func isLowercaseHex(_ bytes: some Collection<UInt8>, count: Int) -> Bool {
        bytes.count == count && bytes.allSatisfy(isLowercaseHexDigit)
    }

    /// The lowercase hex digits, by value.
    public static let lowercaseHexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
