#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// A `Host` value or an absolute URL's authority, `uri-host [":" port]`
/// (RFC 9110, 7.2; RFC 3986, 3.2.2), checked and split. The host is an IPv6
/// literal in brackets (a valid address, no zone), or a name or IPv4
/// address of visible ASCII without the bytes that would make it a path, a
/// user, a list or a second address; the port, when there is a colon, is
/// 1 to 5 digits of at most 65535.
public struct HTTPAuthority: Sendable, Equatable {
    /// Lowercased; an IPv6 literal keeps its brackets (`[::1]`).
    public var host: String
    public var port: Int?
    /// True for an IPv6 literal or a dotted-quad IPv4 address: what a
    /// browser connects to without asking DNS, so no page can rebind it.
    public var isIPLiteral: Bool

    /// Nil when `text` is not a host and an optional port.
    public init?(_ text: String) {
        var bytes = Array(text.utf8)[...]
        var port: Int?
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), Self.isIPv6(bytes[(bytes.startIndex + 1)..<close]) else { return nil }
            let rest = bytes[(close + 1)...]
            if !rest.isEmpty {
                guard rest.first == UInt8(ascii: ":"), let p = Self.port(rest.dropFirst()) else { return nil }
                port = p
            }
            bytes = bytes[...close]
        } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
            guard let p = Self.port(bytes[(colon + 1)...]) else { return nil }
            port = p
            bytes = bytes[..<colon]
        }
        let bracketed = bytes.first == UInt8(ascii: "[")
        guard !bytes.isEmpty, bracketed || bytes.allSatisfy(Self.isNameByte) else { return nil }
        host = String(decoding: bytes, as: UTF8.self).lowercased()
        self.port = port
        isIPLiteral = bracketed || Self.isIPv4(bytes)
    }

    /// Four decimal numbers of at most 255 (1 to 3 digits each), dot-separated.
    public static func isIPv4(_ b: ArraySlice<UInt8>) -> Bool {
        var parts = 0, digits = 0, value = 0
        for c in b {
            if c == UInt8(ascii: ".") {
                guard digits > 0, value <= 255 else { return false }
                parts += 1; digits = 0; value = 0
            } else if ASCII.isDigit(c), digits < 3 {
                digits += 1; value = value * 10 + Int(c - 0x30)
            } else { return false }
        }
        return parts == 3 && digits > 0 && value <= 255
    }

    /// An IPv6 address as `inet_pton` reads it (hex digits, colons, an
    /// embedded IPv4 address; no zone, no IPvFuture).
    static func isIPv6(_ b: ArraySlice<UInt8>) -> Bool {
        guard !b.isEmpty, b.count < 46,
              b.allSatisfy({ ASCII.isHexDigit($0) || $0 == 0x3A || $0 == 0x2E })
        else { return false }
        var address = in6_addr()
        return inet_pton(AF_INET6, String(decoding: b, as: UTF8.self), &address) == 1
    }

    private static func port(_ b: ArraySlice<UInt8>) -> Int? {
        guard (1...5).contains(b.count), b.allSatisfy(ASCII.isDigit) else { return nil }
        let value = b.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        return (1...65535).contains(value) ? value : nil
    }

    private static func isNameByte(_ b: UInt8) -> Bool {
        b > 0x20 && b < 0x7F && b != UInt8(ascii: "/") && b != UInt8(ascii: "\\") && b != UInt8(ascii: "@")
            && b != UInt8(ascii: "?") && b != UInt8(ascii: "#") && b != UInt8(ascii: ",")
            && b != UInt8(ascii: "[") && b != UInt8(ascii: "]") && b != UInt8(ascii: ":")
    }
}
