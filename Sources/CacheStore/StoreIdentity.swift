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
/// header, a set-aside `index.log.corrupt-*`, temp files, `scrub.state`,
/// `feeds.state` and `posts.state` (the store's own, though only an open
/// store writes them), and the store's
/// empty subdirectories (`tmp/` may hold temp files); `lost+found` (the root
/// of a file system made for the store) is ignored.
enum StoreIdentity {
    /// Names judged in one directory at most (one more is read, to know
    /// whether there are more). A store being created holds a handful; a
    /// directory holding more than this is not one.
    static let listingLimit = 256
    /// Unexpected entries named in the refusal.
    static let shownEntries = 5

    /// What was found that keeps `files` from being a store: nil when it is
    /// one (or may become one).
    struct Finding: Sendable, Equatable {
        /// The first unexpected entries, sorted among those read (`name/` for
        /// a directory); `index.log` is told by `log` instead.
        var entries: [String]
        /// More unexpected entries exist than `entries` names, or a directory
        /// holds more than `listingLimit` names.
        var more: Bool
        /// What `index.log` is.
        var log: LogFinding
    }

    static func judge(_ files: ConfinedDirectory) throws(SystemError) -> Finding? {
        let status = try files.status(StoreNames.logFile)
        if let status, status.isRegular, try hasMagic(files) { return nil }
        let log: LogFinding = status.map { $0.isRegular ? .withoutHeader : .notRegular($0.kind) } ?? .missing
        var unexpected: [String] = []
        var more = false
        for entry in try sortedListing(files, ".", more: &more) where entry.name != StoreNames.logFile {
            guard isOwnTopLevel(entry) else {
                unexpected.append(shown(entry.name, entry.kind))
                continue
            }
            guard entry.kind == .directory, StoreNames.subdirectories.contains(entry.name) else { continue }
            for inner in try sortedListing(files, entry.name, more: &more) {
                if entry.name == "tmp", inner.kind == .regular, StoreNames.isTempName(inner.name) { continue }
                unexpected.append(shown(entry.name + "/" + inner.name, inner.kind))
            }
        }
        let logIsNoFile = if case .notRegular = log { true } else { false }
        guard logIsNoFile || !unexpected.isEmpty || more else { return nil }
        return Finding(entries: Array(unexpected.prefix(shownEntries)), more: more || unexpected.count > shownEntries, log: log)
    }

    /// The first `listingLimit` entries of `directory` read, sorted by name;
    /// sets `more` when it holds more than that.
    private static func sortedListing(_ files: ConfinedDirectory, _ directory: String,
                                      more: inout Bool) throws(SystemError) -> [ConfinedDirectory.Entry] {
        let entries = try files.list(directory, limit: listingLimit + 1)
        if entries.count > listingLimit { more = true }
        return entries.prefix(listingLimit).sorted { $0.name < $1.name }
    }

    /// True when `index.log` begins with the log's magic.
    private static func hasMagic(_ files: ConfinedDirectory) throws(SystemError) -> Bool {
        let magic = RecordCodec.magic
        return try files.read(StoreNames.logFile, limit: magic.count) == magic
    }

    /// A name at the top of the store, other than `index.log`, that a store
    /// being created may hold.
    private static func isOwnTopLevel(_ entry: ConfinedDirectory.Entry) -> Bool {
        switch entry.kind {
        case .directory: StoreNames.subdirectories.contains(entry.name) || entry.name == "lost+found"
        case .regular: entry.name == StoreNames.lockFile || entry.name == StoreNames.scrubStateFile || entry.name == StoreNames.feedsStateFile
            || entry.name == StoreNames.postsStateFile
            || StoreNames.isSetAsideLog(entry.name) || StoreNames.isTempName(entry.name)
        case .symbolicLink, .special: false
        }
    }

    /// How an entry is named in the refusal: `name/` for a directory, `name`
    /// for a file, else `name (a symbolic link)` (`FileKind`'s words).
    private static func shown(_ path: String, _ kind: FileKind) -> String {
        let name = StoreNames.printable(path)
        switch kind {
        case .directory: return name + "/"
        case .regular: return name
        case .symbolicLink, .special: return name + " (\(kind))"
        }
    }
}

extension StoreIdentity.Finding {
    /// "notes.txt, photos/, posts/12.json and more"; "more entries than a new
    /// store holds" when every name read was the store's own but there were
    /// too many (hundreds of temp files); empty when `log` alone is the reason.
    var summary: String {
        let list = entries.joined(separator: ", ")
        return more ? (entries.isEmpty ? "more entries than a new store holds" : list + " and more") : list
    }
}
