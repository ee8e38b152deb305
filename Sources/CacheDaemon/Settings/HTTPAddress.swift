#if canImport(Glibc)
import Glibc
#endif

/// One address of `http-listen` (docs/http.md, "Listening"): a literal IP
/// address and port, or an absolute Unix socket path.
public enum HTTPAddress: Sendable, Equatable, CustomStringConvertible {
    case tcp(host: String, port: Int, ipv6: Bool)
    case unix(String)

    /// True for 127.0.0.0/8 and ::1: reachable from this host only.
    public var isLoopback: Bool {
        switch self {
        case .unix: return true
        case let .tcp(host, _, ipv6): return ipv6 ? host == "::1" : host.hasPrefix("127.")
        }
    }

    public var description: String {
        switch self {
        case let .tcp(host, port, ipv6): return ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unix(let path): return path
        }
    }

    /// `127.0.0.1:8080`, `[::1]:8080` or `/run/cached/http.sock`.
    static func parse(_ text: String) throws(SettingsError) -> HTTPAddress {
        let usage = "http-listen takes 127.0.0.1:PORT, [::1]:PORT, another literal IP address and port, or an absolute socket path, not \"\(text)\""
        if text.hasPrefix("/") {
            let path = try ValueParser.socketPath("http-listen", text)
            return .unix(path)
        }
        let host: String, portText: Substring, ipv6: Bool
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { throw SettingsError(usage) }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = text[text.index(close, offsetBy: 2)...]
            ipv6 = true
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw SettingsError(usage) }
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
            ipv6 = false
        }
        guard let port = Int(portText), (1...65535).contains(port), portText.allSatisfy(\.isNumber),
              isLiteral(host, ipv6: ipv6) else { throw SettingsError(usage) }
        return .tcp(host: host, port: port, ipv6: ipv6)
    }

    private static func isLiteral(_ host: String, ipv6: Bool) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(ipv6 ? AF_INET6 : AF_INET, host, &buffer) == 1
    }

    /// A comma- or space-separated list; empty: none.
    static func parseList(_ text: String) throws(SettingsError) -> [HTTPAddress] {
        var out: [HTTPAddress] = []
        for item in text.split(whereSeparator: { $0 == "," || $0 == " " }) {
            let a = try parse(String(item))
            if out.contains(a) { throw SettingsError("http-listen names \(a) twice") }
            out.append(a)
        }
        return out
    }
}
