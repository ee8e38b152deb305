import CacheSystem

/// Whether a directory is a store, judged before anything in it is created,
/// emptied or written (docs/storage-format.md, "What makes a directory a
/// store"): a `--store` pointed by mistake at `$HOME` or `/var/lib/x` must be
/// refused, not have its `tmp/` and `posts/` emptied.
///
/// A directory is a store when `index.log` is a regular file that begins
/// with the log's magic (`CACHEDL`, any version: a newer one is refused
/// later, as such). Without it, the directory is taken as a new store only
/// when it holds nothing, or nothing but what a store being created holds
/// before its log header is durable: `lock`, an `index.log` without the
/// header, a set-aside `index.log.corrupt-*`, temp files, and the store's
/// empty subdirectories (`tmp/` may hold temp files); `lost+found` (the root
/// of a file system made for the store) is ignored.
enum StoreIdentity {
    /// Names read from one directory at most. A store being created holds a
    /// handful; a listing that reaches this is not one.
    static let listingLimit = 256
    /// Unexpected entries named in the refusal.
    static let shownEntries = 5

    /// What was found that keeps `files` from being a store: nil when it is
    /// one (or may become one).
    struct Finding: Sendable, Equatable {
        /// The first unexpected entries, sorted (`name/` for a directory).
        var entries: [String]
        /// More unexpected entries exist than `entries` names.
        var more: Bool
        /// `index.log` is there, a regular file, without the log's header.
        var logWithoutHeader: Bool
    }

    static func judge(_ files: ConfinedDirectory) throws(SystemError) -> Finding? {
        let log = try files.status("index.log")
        if let log, log.isRegular, try hasMagic(files) { return nil }
        var unexpected: [String] = []
        var more = false
        let top = try files.list(".", limit: listingLimit)
        if top.count >= listingLimit { more = true }
        for name in top.sorted() {
            let st = try files.status(name)
            guard let st, isOwnTopLevel(name, st) else {
                unexpected.append(shown(name, st))
                continue
            }
            guard st.isDirectory, StoreNames.subdirectories.contains(name) else { continue }
            let inner = try files.list(name, limit: listingLimit)
            if inner.count >= listingLimit { more = true }
            for entry in inner.sorted() {
                let path = name + "/" + entry
                let est = try files.status(path)
                if name == "tmp", let est, est.isRegular, StoreNames.isTempName(entry) { continue }
                unexpected.append(shown(path, est))
            }
        }
        guard !unexpected.isEmpty || more else { return nil }
        return Finding(entries: Array(unexpected.prefix(shownEntries)), more: more || unexpected.count > shownEntries,
                       logWithoutHeader: log?.isRegular == true)
    }

    /// True when `index.log` begins with the log's magic.
    private static func hasMagic(_ files: ConfinedDirectory) throws(SystemError) -> Bool {
        let magic = RecordCodec.magic
        return try files.read("index.log", limit: magic.count) == magic
    }

    /// A name at the top of the store that a store being created may hold.
    private static func isOwnTopLevel(_ name: String, _ st: FileStatus) -> Bool {
        if st.isDirectory { return StoreNames.subdirectories.contains(name) || name == "lost+found" }
        guard st.isRegular else { return false }
        return name == "lock" || name == "index.log" || name.hasPrefix("index.log.corrupt-") || StoreNames.isTempName(name)
    }

    /// How an entry is named in the refusal.
    private static func shown(_ path: String, _ st: FileStatus?) -> String {
        let name = StoreNames.printable(path)
        guard let st else { return name }
        if st.isDirectory { return name + "/" }
        if st.isSymbolicLink { return name + " (a symbolic link)" }
        if !st.isRegular { return name + " (not a regular file)" }
        return name
    }
}

extension StoreIdentity.Finding {
    /// "notes.txt, photos/, posts/12.json and more".
    var summary: String {
        let list = entries.joined(separator: ", ")
        return more ? (entries.isEmpty ? "more entries than a new store holds" : list + " and more") : list
    }
}
