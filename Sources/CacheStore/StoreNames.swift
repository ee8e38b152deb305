import CacheSystem

/// The names the store gives its own files (docs/storage-format.md, "The
/// store's own names"). Start-up cleanup, gc and the reconciliation of post
/// files remove only regular files whose names have one of these forms:
/// anything else in the store was not made by it and is left alone.
public enum StoreNames {
    /// The subdirectories the store creates, in the order it creates them.
    public static let subdirectories = ["posts", "objects", "tmp", "quarantine"]

    /// The suffixes `TempName.next` is given for the store's temp files:
    /// `.tmp` (a durable write: a post file, the log's rewrite, a cut tail
    /// saved aside) and `.part` (a download).
    static let tempSuffixes = [".tmp", ".part"]

    /// True for a name `TempName.next(".tmp")` or `TempName.next(".part")`
    /// makes: three decimal numbers joined by `-` (pid, counter, time), then the suffix.
    public static func isTempName(_ name: String) -> Bool {
        guard let suffix = tempSuffixes.first(where: { name.hasSuffix($0) }) else { return false }
        let numbers = name.utf8.dropLast(suffix.utf8.count).split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        return numbers.count == 3 && numbers.allSatisfy { !$0.isEmpty && $0.count <= 20 && $0.allSatisfy(ASCII.isDigit) }
    }

    /// True for a fan-out directory's name: the first 2 lowercase hex digits of a hash.
    public static func isFanOut(_ name: String) -> Bool {
        ASCII.isLowercaseHex(name.utf8, count: 2)
    }

    /// The object named by `fanOut`/`name` (2 and 30 lowercase hex digits), else nil.
    public static func objectHash(fanOut: String, name: String) -> Hash128? {
        guard isFanOut(fanOut), ASCII.isLowercaseHex(name.utf8, count: 30) else { return nil }
        return Hash128(hex: fanOut + name)
    }

    /// The post id of a post file's name, `<id>.json` exactly as the store
    /// spells it (`Store.postPath`: no sign but `-`, no leading zero); else nil.
    public static func postID(fileName name: String) -> Int64? {
        guard name.hasSuffix(".json"), let id = Int64(name.dropLast(5)), "\(id).json" == name else { return nil }
        return id
    }

    /// `name` as it may appear in a log line: control characters escaped, so
    /// a file name cannot forge or split a line.
    static func printable(_ name: String) -> String {
        var out = ""
        for scalar in name.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7f {
                out += "\\x" + String(scalar.value, radix: 16).leftPadded(to: 2)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

/// Entries in the store the store did not make, each reported once (through
/// `StoreConfiguration.onIgnoredEntry`) when cleanup or gc first meets and
/// leaves it. The set of reported paths is bounded: past `limit` entries one
/// last line says that further ones go unnamed.
final class IgnoredEntries: Sendable {
    /// Paths reported at most; a store holds few foreign files, and a store
    /// flooded with them must not grow the daemon's memory without bound.
    static let limit = 1_000

    private let reported = Locked<Set<String>>([])
    private let report: (@Sendable (String) -> Void)?

    init(report: (@Sendable (String) -> Void)?) { self.report = report }

    /// Notes that `path` was left alone, saying `what` it is.
    func note(_ path: String, _ what: String) {
        let message: String? = reported.withLock { seen in
            guard !seen.contains(path) else { return nil }
            if seen.count > Self.limit { return nil }
            seen.insert(path)
            if seen.count > Self.limit {
                return "more than \(Self.limit) entries in the store were not made by cached; they are left alone and not named one by one"
            }
            return "ignored \(StoreNames.printable(path)) (\(what)): not a file cached made; it is left as it is"
        }
        if let message { report?(message) }
    }

    /// What an entry is, for the line that reports it.
    static func kind(_ st: FileStatus) -> String {
        if st.isSymbolicLink { return "a symbolic link" }
        if st.isDirectory { return "a directory" }
        return st.isRegular ? "a file" : "a special file"
    }

    /// How many paths were reported (for tests).
    var count: Int { reported.withLock { $0.count } }
}
