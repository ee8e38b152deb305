import CacheService
import CacheStore
import CacheProtocol
#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// Parses setting values from text; each error names the setting and says
/// what was expected (docs/operations.md, "Configuration").
enum ValueParser {
    /// "512", "64K", "8M", "1G", "1T" (powers of 1024; "Ki" and "KiB"-like
    /// spellings too), at least `minimum`.
    static func size(_ key: String, _ text: String, minimum: Int64 = 0, _ rule: String = "") throws(SettingsError) -> Int64 {
        var digits = text.trimmed()
        var multiplier: Int64 = 1
        if let last = digits.last?.uppercased() {
            switch last {
            case "K": multiplier = 1 << 10
            case "M": multiplier = 1 << 20
            case "G": multiplier = 1 << 30
            case "T": multiplier = 1 << 40
            default: break
            }
            if multiplier > 1 { digits.removeLast() }
            if digits.uppercased().hasSuffix("I") { digits.removeLast() }
        }
        guard let n = Int64(digits), n >= 0, n <= Int64.max / multiplier else {
            throw SettingsError("\(key) must be a size like 512, 64K, 8M or 1G, not \"\(text)\"")
        }
        guard n * multiplier >= minimum else { throw SettingsError("\(key) must be \(rule)") }
        return n * multiplier
    }

    /// A whole number in `range`.
    static func whole(_ key: String, _ text: String, _ range: ClosedRange<Int>) throws(SettingsError) -> Int {
        guard let n = Int(text), range.contains(n) else {
            throw SettingsError("\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound), not \"\(text)\"")
        }
        return n
    }

    /// The longest duration accepted: a day. Anything longer is a typo
    /// (milliseconds written as seconds), not a timeout anyone wants.
    static let maxSeconds = 86_400.0

    /// Seconds: "10", "2.5", "1500ms", "30s".
    static func seconds(_ key: String, _ text: String, allowZero: Bool = false) throws(SettingsError) -> Double {
        var t = text.trimmed().lowercased()
        var scale = 1.0
        if t.hasSuffix("ms") { t.removeLast(2); scale = 0.001 } else if t.hasSuffix("s") { t.removeLast() }
        guard let v = Double(t), v.isFinite, v >= 0, allowZero || v > 0, v * scale <= maxSeconds else {
            throw SettingsError("\(key) must be a duration like 10, 2.5, 1500ms or 30s, not \"\(text)\"")
        }
        return v * scale
    }

    /// `seconds`, as the span the subsystems take.
    static func duration(_ key: String, _ text: String, allowZero: Bool = false) throws(SettingsError) -> Duration {
        .seconds(try seconds(key, text, allowZero: allowZero))
    }

    /// A span as `settings` prints it: its seconds, as written before spans
    /// were typed (`300.0`, `0.25`).
    static func formatSeconds(_ span: Duration) -> String { "\(span.inSeconds)" }

    /// A lifetime in whole seconds: `86400`, `90s`, `30m`, `12h`, `1d`;
    /// 0 allowed; at most 3650 days.
    static func age(_ key: String, _ text: String) throws(SettingsError) -> Int64 {
        var t = text.trimmed().lowercased()
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var scale: Int64 = 1
        if let last = t.last, let unit = units[last] { t.removeLast(); scale = unit }
        guard !t.isEmpty, t.utf8.allSatisfy(ASCII.isDigit), let v = Int64(t), v <= 3650 * 86400 / scale else {
            throw SettingsError("\(key) must be whole seconds like 86400, or with a unit like 90s, 30m, 12h or 1d (at most 3650d), not \"\(text)\"")
        }
        return v * scale
    }

    /// `age`, as the span the subsystems take.
    static func ageSpan(_ key: String, _ text: String) throws(SettingsError) -> Duration {
        .seconds(try age(key, text))
    }

    /// An age as `settings` prints it: its whole seconds (`86400`).
    static func formatAge(_ span: Duration) -> String { String(span.wholeSeconds) }

    static func bool(_ key: String, _ text: String) throws(SettingsError) -> Bool {
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw SettingsError("\(key) must be true or false, not \"\(text)\"")
        }
    }

    static func logLevel(_ key: String, _ text: String) throws(SettingsError) -> LogLevel {
        guard let l = LogLevel(name: text) else { throw SettingsError("\(key) must be one of error, warning, notice, info, debug, not \"\(text)\"") }
        return l
    }

    static func verifyReads(_ key: String, _ text: String) throws(SettingsError) -> VerifyReads {
        guard let v = VerifyReads(rawValue: text) else { throw SettingsError("\(key) must be one of always, on-change, auto, not \"\(text)\"") }
        return v
    }

    static func url(_ key: String, _ value: String) throws(SettingsError) -> String {
        guard URLScheme.isHTTP(value) else { throw SettingsError("\(key) must be an http:// or https:// URL, not \"\(value)\"") }
        return value
    }

    /// A JSON Pointer (RFC 6901); with `emptyIsNone`, "" means none (the default).
    static func pointer(_ key: String, _ value: String, emptyIsNone: Bool) throws(SettingsError) -> JSONPointer? {
        if value.isEmpty && emptyIsNone { return nil }
        do throws(JSONPointer.SyntaxError) { return try JSONPointer(value) } catch {
            throw SettingsError("\(key) must be a JSON Pointer, not \"\(value)\": \(error)")
        }
    }

    /// `posts-keep`: feed, all, or a count from 1 to 100,000,000.
    static func keep(_ key: String, _ value: String) throws(SettingsError) -> PostsKeep {
        switch value {
        case "feed": return .feed
        case "all": return .all
        default:
            guard let n = Int(value), (1...100_000_000).contains(n) else {
                throw SettingsError("\(key) must be feed, all or a count from 1 to 100000000, not \"\(value)\"")
            }
            return .newest(n)
        }
    }

    /// A pointer to a member of each item: not empty (that would be the item itself).
    static func fieldPointer(_ key: String, _ value: String) throws(SettingsError) -> JSONPointer {
        guard !value.isEmpty, let p = try pointer(key, value, emptyIsNone: false) else {
            throw SettingsError("\(key) must be a JSON Pointer to a member of each item, such as /id, not empty")
        }
        return p
    }

    static func path(_ key: String, _ value: String) throws(SettingsError) -> String {
        guard !value.isEmpty else { throw SettingsError("\(key) must not be empty") }
        return value
    }

    /// `sun_path` holds 108 bytes with the terminating NUL.
    static let maxSocketPath = 107

    static func socketPath(_ key: String, _ value: String) throws(SettingsError) -> String {
        let p = try path(key, value)
        guard p.utf8.count <= maxSocketPath else { throw SettingsError("socket path is longer than \(maxSocketPath) bytes: \(value)") }
        return p
    }

    /// A proxy URL with a scheme libcurl speaks, or `none` (stored as "":
    /// no proxy, not even one from the environment).
    static func proxy(_ value: String) throws(SettingsError) -> String {
        if value.lowercased() == "none" { return "" }
        let schemes = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]
        let lower = value.lowercased()
        guard let sep = lower.firstRange(of: "://"), schemes.contains(String(lower[..<sep.lowerBound])),
              lower[sep.upperBound...].contains(where: { $0 != "/" }), isVisibleASCII(value) else {
            throw SettingsError("proxy must be a URL like http://proxy.example:3128 (http, https, socks4, socks4a, socks5 or socks5h) or none, not \"\(value)\"")
        }
        return value
    }

    /// A comma-separated list of hosts, domains, addresses, CIDR ranges or `*`.
    static func hostList(_ value: String) throws(SettingsError) -> String {
        let hosts = value.split(separator: ",").map { $0.trimmed() }.filter { !$0.isEmpty }
        guard !hosts.isEmpty, hosts.allSatisfy(isVisibleASCII) else {
            throw SettingsError("no-proxy must be a comma-separated list of host names, domains, addresses or CIDR ranges, or *, not \"\(value)\"")
        }
        return hosts.joined(separator: ",")
    }

    /// Comma-separated DNS names (letters, digits, `-` and `.`).
    static func hostNames(_ key: String, _ value: String) throws(SettingsError) -> [String] {
        let names = value.split(separator: ",").map { $0.trimmed().lowercased() }.filter { !$0.isEmpty }
        for n in names where !n.utf8.allSatisfy({ ASCII.isLetter($0) || ASCII.isDigit($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }) {
            throw SettingsError("\(key) takes host names such as cache.example.org, comma-separated, not \"\(n)\"")
        }
        return names
    }

    /// Comma-separated whole numbers from 1 to 16384 (`variant-sizes`), sorted, each once; empty: none.
    static func sizeList(_ key: String, _ value: String) throws(SettingsError) -> [Int] {
        var sizes = Set<Int>()
        for part in value.split(separator: ",").map({ $0.trimmed() }) where !part.isEmpty {
            guard let n = Int(part), (1...16384).contains(n) else {
                throw SettingsError("\(key) takes whole numbers from 1 to 16384, comma-separated (such as 96,192,400), not \"\(part)\"")
            }
            sizes.insert(n)
        }
        return sizes.sorted()
    }

    private static func isVisibleASCII(_ s: String) -> Bool { s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F } }

    /// A file (or directory) this process can read; checked at start so a
    /// typo fails `--check-config` rather than every HTTPS fetch.
    static func readable(_ key: String, _ value: String, directory: Bool) throws(SettingsError) -> String {
        guard value.hasPrefix("/") else { throw SettingsError("\(key) must be an absolute path, not \"\(value)\"") }
        var st = stat()
        guard stat(value, &st) == 0 else { throw SettingsError("\(key) \(value): \(String(cString: strerror(errno)))") }
        let isDirectory = st.st_mode & S_IFMT == S_IFDIR
        if directory && !isDirectory { throw SettingsError("\(key) \(value) is not a directory (ca-file takes a single PEM file)") }
        if !directory && st.st_mode & S_IFMT != S_IFREG { throw SettingsError("\(key) \(value) is not a regular file (ca-path takes a directory)") }
        guard access(value, directory ? R_OK | X_OK : R_OK) == 0 else {
            throw SettingsError("\(key) \(value): \(String(cString: strerror(errno)))")
        }
        return value
    }
}
