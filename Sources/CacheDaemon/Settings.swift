import CacheFetch
import CacheProtocol
import CacheSystem
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's settings (docs/operations.md, "Configuration"). Flags beat environment beat defaults.
public struct Settings: Sendable, Equatable {
    /// URL of the JSON posts feed. No default: without it, posts are never fetched.
    public var postsURL: String?
    /// URL of the JSON image manifest. No default.
    public var imagesURL: String?
    /// Base for relative image URLs. Default: the directory of `imagesURL`.
    public var imagesBaseURL: String?
    /// Store directory. Default per `DefaultPaths.store`.
    public var store: String
    /// Socket path. Default per `DefaultPaths.socket`.
    public var socket: String
    /// Cap on the bytes of cached images; 0 = none. Default 0.
    public var maxSize: Int64 = 0
    /// Largest image or feed body accepted. Default 64 MiB.
    public var maxObjectSize: Int64 = 64 << 20
    /// Parallel downloads, retries, timeouts and redirects; the defaults are
    /// `FetchPolicy`'s (concurrency 8, 3 retries from 0.25 s, connect 10 s,
    /// transfer 300 s, stall 30 s, 5 redirects).
    public var fetch = FetchPolicy()
    /// Connections served at once; one more gets `busy` and is closed. Default 4096.
    public var maxConnections = 4096
    /// Seconds a connection may stay silent with nothing pending before it is
    /// closed; 0 keeps connections forever. Default 300.
    public var idleTimeout = 300.0
    /// Answer bytes queued for a client that does not read, before the daemon
    /// stops reading its requests. Default 4 MiB.
    public var maxQueuedBytes: Int64 = 4 << 20
    /// Deepest nesting of arrays and objects accepted in a request. Default 64.
    public var maxJSONDepth = 64
    /// The configuration file the settings were read from, if any.
    public var configFile: String?
    /// Run a full prefetch right after start. Default false.
    public var prefetchOnStart = false
    /// error, warning, notice, info or debug. Default info.
    public var logLevel: LogLevel = .info

    /// Every key, as written in flags (`--key`) and environment (`CACHED_KEY`).
    public static let keys = ["posts-url", "images-url", "images-base-url", "store", "socket", "max-size",
                              "max-object-size", "concurrency", "prefetch-on-start", "log-level",
                              "retries", "retry-delay", "connect-timeout", "timeout", "stall-timeout", "max-redirects",
                              "max-connections", "idle-timeout", "max-queued-bytes", "max-json-depth",
                              "ca-file", "ca-path", "proxy", "no-proxy"]

    public init(environment: [String: String] = [:]) {
        store = DefaultPaths.store(environment: environment)
        socket = DefaultPaths.socket(environment: environment)
    }

    /// Sets one key from text; throws a message naming the key and the problem.
    public mutating func set(_ key: String, _ value: String) throws(SettingsError) {
        switch key {
        case "posts-url": postsURL = try Settings.url(key, value)
        case "images-url": imagesURL = try Settings.url(key, value)
        case "images-base-url": imagesBaseURL = try Settings.url(key, value)
        case "store": store = try Settings.path(key, value)
        case "socket":
            socket = try Settings.path(key, value)
            guard socket.utf8.count <= 107 else { throw SettingsError("socket path is longer than 107 bytes: \(value)") }
        case "max-size": maxSize = try Settings.size(key, value)
        case "max-object-size":
            maxObjectSize = try Settings.size(key, value)
            guard maxObjectSize > 0 else { throw SettingsError("max-object-size must be greater than 0") }
        case "concurrency":
            guard let n = Int(value), (1...256).contains(n) else { throw SettingsError("concurrency must be a whole number from 1 to 256, not \"\(value)\"") }
            fetch.concurrency = n
        case "prefetch-on-start":
            switch value.lowercased() {
            case "1", "true", "yes", "on": prefetchOnStart = true
            case "0", "false", "no", "off": prefetchOnStart = false
            default: throw SettingsError("prefetch-on-start must be true or false, not \"\(value)\"")
            }
        case "log-level":
            guard let l = LogLevel(name: value) else { throw SettingsError("log-level must be one of error, warning, notice, info, debug, not \"\(value)\"") }
            logLevel = l
        case "max-json-depth": maxJSONDepth = try Settings.whole(key, value, 2...1000)
        case "max-connections": maxConnections = try Settings.whole(key, value, 1...1_000_000)
        case "idle-timeout": idleTimeout = try Settings.seconds(key, value, allowZero: true)
        case "max-queued-bytes":
            maxQueuedBytes = try Settings.size(key, value)
            guard maxQueuedBytes >= 64 << 10 else { throw SettingsError("max-queued-bytes must be at least 64K") }
        case "retries": fetch.retries = try Settings.whole(key, value, 0...20)
        case "max-redirects": fetch.maxRedirects = try Settings.whole(key, value, 0...50)
        case "retry-delay": fetch.backoffBase = try Settings.seconds(key, value, allowZero: true)
        case "connect-timeout": fetch.connectTimeout = try Settings.seconds(key, value)
        case "timeout": fetch.totalTimeout = try Settings.seconds(key, value)
        case "stall-timeout": fetch.lowSpeedTime = max(1, Int(try Settings.seconds(key, value).rounded(.up)))
        case "ca-file": fetch.caFile = try Settings.readable(key, value, directory: false)
        case "ca-path": fetch.caPath = try Settings.readable(key, value, directory: true)
        case "proxy": fetch.proxy = try Settings.proxy(value)
        case "no-proxy":
            let hosts = value.split(separator: ",").map { $0.trimmed() }.filter { !$0.isEmpty }
            guard !hosts.isEmpty, hosts.allSatisfy({ h in h.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F } }) else {
                throw SettingsError("no-proxy must be a comma-separated list of host names, domains, addresses or CIDR ranges, or *, not \"\(value)\"")
            }
            fetch.noProxy = hosts.joined(separator: ",")
        default:
            throw SettingsError("unknown setting \"\(key)\"")
        }
    }

    /// The names of the fetch settings that differ between `a` and `b` (for
    /// the SIGHUP log line: the HTTP client takes them only at start).
    static func fetchDifferences(_ a: FetchPolicy, _ b: FetchPolicy) -> [String] {
        var out: [String] = []
        if a.concurrency != b.concurrency { out.append("concurrency") }
        if a.retries != b.retries { out.append("retries") }
        if a.backoffBase != b.backoffBase { out.append("retry-delay") }
        if a.connectTimeout != b.connectTimeout { out.append("connect-timeout") }
        if a.totalTimeout != b.totalTimeout { out.append("timeout") }
        if a.lowSpeedTime != b.lowSpeedTime { out.append("stall-timeout") }
        if a.maxRedirects != b.maxRedirects { out.append("max-redirects") }
        if a.caFile != b.caFile { out.append("ca-file") }
        if a.caPath != b.caPath { out.append("ca-path") }
        if a.proxy != b.proxy { out.append("proxy") }
        if a.noProxy != b.noProxy { out.append("no-proxy") }
        return out
    }

    /// Parses "512", "64K", "8M", "1G" (powers of 1024).
    public static func size(_ key: String, _ text: String) throws(SettingsError) -> Int64 {
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
            if digits.uppercased().hasSuffix("I") { digits.removeLast() }  // accept "KiB"-ish "Ki"
        }
        guard let n = Int64(digits), n >= 0, n <= Int64.max / multiplier else {
            throw SettingsError("\(key) must be a size like 512, 64K, 8M or 1G, not \"\(text)\"")
        }
        return n * multiplier
    }

    /// A whole number in `range`.
    static func whole(_ key: String, _ text: String, _ range: ClosedRange<Int>) throws(SettingsError) -> Int {
        guard let n = Int(text), range.contains(n) else {
            throw SettingsError("\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound), not \"\(text)\"")
        }
        return n
    }

    /// Seconds: "10", "2.5", "1500ms", "30s".
    public static func seconds(_ key: String, _ text: String, allowZero: Bool = false) throws(SettingsError) -> Double {
        var t = text.trimmed().lowercased()
        var scale = 1.0
        if t.hasSuffix("ms") { t.removeLast(2); scale = 0.001 } else if t.hasSuffix("s") { t.removeLast() }
        guard let v = Double(t), v.isFinite, v >= 0, allowZero || v > 0, v * scale <= 86_400 else {
            throw SettingsError("\(key) must be a duration like 10, 2.5, 1500ms or 30s, not \"\(text)\"")
        }
        return v * scale
    }

    private static func url(_ key: String, _ value: String) throws(SettingsError) -> String {
        let lower = value.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
            throw SettingsError("\(key) must be an http:// or https:// URL, not \"\(value)\"")
        }
        return value
    }

    /// A proxy URL with a scheme libcurl speaks, or `none` (no proxy, not
    /// even one from the environment).
    private static func proxy(_ value: String) throws(SettingsError) -> String {
        if value.lowercased() == "none" { return "" }
        let schemes = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]
        let lower = value.lowercased()
        guard let sep = lower.firstRange(of: "://"), schemes.contains(String(lower[..<sep.lowerBound])),
              lower[sep.upperBound...].contains(where: { $0 != "/" }),
              value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw SettingsError("proxy must be a URL like http://proxy.example:3128 (http, https, socks4, socks4a, socks5 or socks5h) or none, not \"\(value)\"")
        }
        return value
    }

    /// A file (or directory) this process can read; checked at start so a
    /// typo fails `--check-config` rather than every HTTPS fetch.
    private static func readable(_ key: String, _ value: String, directory: Bool) throws(SettingsError) -> String {
        guard value.hasPrefix("/") else { throw SettingsError("\(key) must be an absolute path, not \"\(value)\"") }
        var st = stat()
        guard stat(value, &st) == 0 else {
            throw SettingsError("\(key) \(value): \(String(cString: strerror(errno)))")
        }
        let isDirectory = st.st_mode & S_IFMT == S_IFDIR
        if directory && !isDirectory { throw SettingsError("\(key) \(value) is not a directory (ca-file takes a single PEM file)") }
        if !directory && st.st_mode & S_IFMT != S_IFREG { throw SettingsError("\(key) \(value) is not a regular file (ca-path takes a directory)") }
        guard access(value, directory ? R_OK | X_OK : R_OK) == 0 else {
            throw SettingsError("\(key) \(value): \(String(cString: strerror(errno)))")
        }
        return value
    }

    private static func path(_ key: String, _ value: String) throws(SettingsError) -> String {
        guard !value.isEmpty else { throw SettingsError("\(key) must not be empty") }
        return value
    }

    /// Defaults, then the configuration file, then the environment, then the
    /// flags (each later one wins). The file is `--config PATH` (which must
    /// exist) or /etc/cached/cached.conf when present.
    public static func parse(arguments: [String], environment: [String: String]) throws(SettingsError) -> ParsedCommandLine {
        var flags: [(key: String, value: String)] = []
        var configPath: String?
        var check = false
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if arg == "--help" || arg == "-h" { return .help }
            if arg == "--version" { return .version }
            if arg == "--check-config" { check = true; continue }
            guard arg.hasPrefix("--") else { throw SettingsError("unexpected argument \"\(arg)\" (see --help)") }
            var key = String(arg.dropFirst(2))
            var value: String
            if let eq = key.firstIndex(of: "=") {
                value = String(key[key.index(after: eq)...])
                key = String(key[..<eq])
            } else if key == "prefetch-on-start" && (i >= arguments.count || arguments[i].hasPrefix("--")) {
                value = "true"
            } else {
                guard i < arguments.count else { throw SettingsError("--\(key) needs a value") }
                value = arguments[i]
                i += 1
            }
            if key == "config" { configPath = value; continue }
            guard keys.contains(key) else { throw SettingsError("unknown option --\(key) (see --help)") }
            flags.append((key, value))
        }

        var s = Settings(environment: environment)
        let path = configPath ?? ConfigFile.defaultPath
        if let text = try ConfigFile.read(path) {
            try ConfigFile.apply(try ConfigFile.parse(text, path: path), path: path, to: &s)
            s.configFile = path
        } else if configPath != nil {
            throw SettingsError("\(path): no such configuration file")
        }
        for key in keys {
            let env = "CACHED_" + key.uppercased().replacing("-", with: "_")
            if let v = environment[env] {
                do { try s.set(key, v) } catch { throw SettingsError("\(env): \(error.message)") }
            }
        }
        for (key, value) in flags {
            do { try s.set(key, value) } catch { throw SettingsError("--\(key): \(error.message)") }
        }
        return check ? .checked(s) : .run(s)
    }

    public static let usage = """
    usage: cached [--posts-url URL] [--images-url URL] [--images-base-url URL]
                  [--store DIR] [--socket PATH] [--max-size SIZE] [--max-object-size SIZE]
                  [--concurrency N] [--prefetch-on-start] [--log-level LEVEL]
                  [--retries N] [--retry-delay SECONDS] [--connect-timeout SECONDS]
                  [--timeout SECONDS] [--stall-timeout SECONDS] [--max-redirects N]
                  [--max-connections N] [--idle-timeout SECONDS] [--max-queued-bytes SIZE]
                  [--max-json-depth N] [--ca-file PEM] [--ca-path DIR]
                  [--proxy URL|none] [--no-proxy HOSTS]
           cached [--config FILE] --check-config
           cached --help | --version

    Keeps a durable, content-addressed local copy of a JSON posts feed and of
    the images of a manifest, and serves it over a Unix socket (see cachectl).
    Settings come from the configuration file (--config FILE, default
    /etc/cached/cached.conf when present; "key = value" lines), then the
    environment (CACHED_<OPTION>, for example CACHED_POSTS_URL), then the
    flags; later ones win. Sizes take K, M, G suffixes (1024).
    """
}

/// What the command line asks for.
public enum ParsedCommandLine: Sendable, Equatable {
    case run(Settings)
    /// `--check-config`: the settings are valid; print them, do not run.
    case checked(Settings)
    case help
    case version
}

/// A setting that could not be used.
public struct SettingsError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

