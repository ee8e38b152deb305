#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// The configuration file: `key = value` lines with the setting names of the
/// command line (`posts-url = https://...`), `#` comments (a whole line, or
/// after a space), optional double quotes around a value, blank lines.
public enum ConfigFile {
    /// The file read when no `--config` is given, if it exists.
    public static let defaultPath = "/etc/cached/cached.conf"
    /// Read as an empty file: a character device every user may write, which
    /// only root can replace.
    static let nullDevice = "/dev/null"
    /// The largest file accepted.
    public static let maxSize = 1 << 20

    /// One setting read from a file, with where it came from.
    public struct Entry: Sendable, Equatable {
        public var key: String
        public var value: String
        public var line: Int
    }

    /// Parses the text of a file; errors read `PATH:LINE: message`.
    public static func parse(_ text: String, path: String) throws(SettingsError) -> [Entry] {
        var entries: [Entry] = []
        for (n, line) in text.lines().enumerated() {
            let location = "\(path):\(n + 1)"
            let trimmed = line.trimmed()
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard let eq = trimmed.firstIndex(of: "=") else {
                throw SettingsError("\(location): expected \"key = value\", found \"\(shownKey(trimmed))\"")
            }
            let key = trimmed[..<eq].trimmed()
            var value = Substring(trimmed[trimmed.index(after: eq)...]).trimmed()
            if value.hasPrefix("\"") {
                guard value.count >= 2, let close = value.dropFirst().firstIndex(of: "\"") else {
                    throw SettingsError("\(location): unterminated quoted value")
                }
                let rest = value[value.index(after: close)...].trimmed()
                guard rest.isEmpty || rest.hasPrefix("#") else { throw SettingsError("\(location): unexpected text after the quoted value") }
                value = String(value[value.index(after: value.startIndex)..<close])
            } else if let hash = value.firstRange(of: " #") ?? value.firstRange(of: "\t#") {
                value = String(value[..<hash.lowerBound]).trimmed()
            }
            guard !key.isEmpty else { throw SettingsError("\(location): missing key before \"=\"") }
            guard Settings.keys.contains(key) else { throw SettingsError("\(location): unknown setting \"\(shownKey(key))\"") }
            guard !value.isEmpty else { throw SettingsError("\(location): \(key) has no value") }
            entries.append(Entry(key: key, value: value, line: n + 1))
        }
        return entries
    }

    /// What a message may quote of a line that is not a setting: the
    /// characters a setting's name may hold, up to 60, then `...`. The rest
    /// may be a value, and a value may be a secret (`fetch-header = X-Api-Key:
    /// ...` mistyped as `fetch-header: X-Api-Key: ...`).
    static func shownKey(_ text: String) -> String {
        let name = text.prefix { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }.prefix(60)
        return name.count == text.count ? String(name) : name + "..."
    }

    /// Applies `entries` to `settings`; errors name the file and line.
    public static func apply(_ entries: [Entry], path: String, to settings: inout Settings) throws(SettingsError) {
        for e in entries {
            do { try settings.set(e.key, e.value) } catch { throw SettingsError("\(path):\(e.line): \(error.message)") }
        }
    }

    /// Reads a file (at most `maxSize` bytes); nil when it does not exist.
    /// A file another user owns or can write, or could replace through a
    /// directory above it, is refused naming the fix (`TrustedFile`): its
    /// settings would be that user's, in a daemon that may run as root. A
    /// symbolic link at `path` is refused, never followed. `/dev/null` is an
    /// empty configuration.
    public static func read(_ path: String) throws(SettingsError) -> String? {
        // `--config /dev/null`: no settings from a file (and not the default one).
        if path == nullDevice { return "" }
        do {
            guard let fd = try open(path) else { return nil }
            defer { fd.close() }
            if let problem = TrustedFile.problem(fd, path: path) {
                throw SettingsError("refusing to read the configuration file: \(problem)")
            }
            let bytes = try fd.readToEnd(limit: maxSize + 1)
            guard bytes.count <= maxSize else { throw SettingsError("\(path): larger than \(maxSize) bytes") }
            guard let text = String(validating: bytes, as: UTF8.self) else { throw SettingsError("\(path): not valid UTF-8") }
            return text
        } catch let e as SettingsError {
            throw e
        } catch {
            throw SettingsError("\(path): \(error)")
        }
    }

    /// Opens the file at `path` itself; nil when there is none. O_NOFOLLOW:
    /// a link there fails (ELOOP) and is refused instead of being read.
    /// O_NONBLOCK: a FIFO planted at the path must not hang the start.
    private static func open(_ path: String) throws(SettingsError) -> FileDescriptor? {
        do {
            return try FileDescriptor.open(path, [.readOnly, .noFollow, .nonBlocking, .noControllingTerminal])
        } catch where error.errno == ENOENT {
            return nil
        } catch where error.errno == ELOOP {
            throw SettingsError("refusing to read the configuration file: \(path) is a symbolic link; name the file itself")
        } catch {
            throw SettingsError("\(path): \(error)")
        }
    }
}
