import CacheSystem

/// The names the store gives its own files (docs/storage-format.md, "The
/// store's own names"). Start-up cleanup, gc and the reconciliation of post
/// files remove only regular files whose names have one of these forms:
/// anything else in the store was not made by it and is left alone.
enum StoreNames {
    /// The lock file at the top of the store (it holds the holder's pid).
    static let lockFile = "lock"
    /// The index log at the top of the store.
    static let logFile = "index.log"
    /// The scrub's progress at the top of the store (`ScrubState`).
    static let scrubStateFile = "scrub.state"
    /// What each feed's pages were walked with, and their warning (`FeedsState`).
    static let feedsStateFile = "feeds.state"
    /// The record of a clean stop with `posts/` matching the log (`PostsState`).
    static let postsStateFile = "posts.state"
    /// What follows a log's name in the name of the damaged tail set aside
    /// beside it (`index.log.corrupt-<time>-<pid>`).
    static let setAsideInfix = ".corrupt-"

    /// The subdirectories the store creates, in the order it creates them.
    static let subdirectories = ["posts", "objects", "tmp", "quarantine"]

    /// The suffixes `TempName.next` is given for the store's temp files:
    /// `.tmp` (a durable write: a post file, the log's rewrite, a cut tail
    /// saved aside) and `.part` (a download).
    static let tempSuffixes = [".tmp", ".part"]

    /// True for a name `TempName.next(".tmp")` or `TempName.next(".part")` makes.
    static func isTempName(_ name: String) -> Bool {
        tempSuffixes.contains { TempName.matches(name, suffix: $0) }
    }

    /// True for the name of a damaged log tail set aside at start.
    static func isSetAsideLog(_ name: String) -> Bool {
        name.hasPrefix(logFile + setAsideInfix)
    }

    /// True for a fan-out directory's name: the first 2 lowercase hex digits of a hash.
    static func isFanOut(_ name: String) -> Bool {
        ASCII.isLowercaseHex(name.utf8, count: 2)
    }

    /// The object named by `fanOut`/`name` (2 and 30 lowercase hex digits:
    /// `Hash128(hex:)` takes lowercase only), else nil.
    static func objectHash(fanOut: String, name: String) -> Hash128? {
        guard fanOut.utf8.count == 2, name.utf8.count == 30 else { return nil }
        return Hash128(hex: fanOut + name)
    }

    /// The post id of a post file's name, `<id>.json` exactly as the store
    /// spells it (`Store.postPath`: no sign but `-`, no leading zero); else nil.
    static func postID(fileName name: String) -> Int64? {
        guard name.hasSuffix(".json"), let id = Int64(name.dropLast(5)), "\(id).json" == name else { return nil }
        return id
    }

    /// `name` as it may appear in a log line (`Printable.escaped`): a file
    /// name cannot forge or split a line.
    static func printable(_ name: String) -> String {
        Printable.escaped(Array(name.utf8))
    }
}

/// Entries in the store the store did not make, each reported once (through
/// `StoreConfiguration.onIgnoredEntry`) when cleanup or gc first meets and
/// leaves it. The set of reported paths is bounded: past `limit` entries one
/// last line says that further ones go unnamed.
final class IgnoredEntries: Sendable {
    /// Paths reported at most; a store holds few foreign files, and a store
    /// flooded with them must not grow the daemon's memory without bound.
    static let limit = 1_000

    private struct Reported {
        var paths: Set<String> = []
        /// `limit` paths were named and the line saying so was written.
        var overflowed = false
    }

    private let reported = Locked(Reported())
    private let report: (@Sendable (String) -> Void)?

    init(report: (@Sendable (String) -> Void)?) { self.report = report }

    /// Notes that `path` was left alone, saying what `kind` of entry it is.
    func note(_ path: String, _ kind: FileKind) {
        let message: String? = reported.withLock { r in
            guard !r.overflowed, !r.paths.contains(path) else { return nil }
            guard r.paths.count < Self.limit else {
                r.overflowed = true
                return "more than \(Self.limit) entries in the store were not made by cached; they are left alone and not named one by one"
            }
            r.paths.insert(path)
            return "ignored \(StoreNames.printable(path)) (\(kind)): not a file cached made; it is left as it is"
        }
        if let message { report?(message) }
    }

    /// How many paths were named (for tests).
    var count: Int { reported.withLock { $0.paths.count } }
}
