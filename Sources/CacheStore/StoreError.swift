import CacheSystem

/// Why a store operation failed, in words an operator can act on.
public enum StoreError: Error, CustomStringConvertible, Sendable {
    /// A file system call failed.
    case io(SystemError)
    /// Another process holds the store's lock file.
    case locked(directory: String, holderPID: Int32?)
    /// Downloaded bytes are not an image; what was declared and what they look like.
    case notAnImage(String)
    /// A body grew past the configured limit.
    case tooLarge(limit: Int64)
    /// An object's bytes no longer match its name; it was quarantined.
    /// `rows` pointed to it (they are uncached now; fetch them again).
    case corruptObject(Hash128, quarantinedTo: String?, rows: [Int])
    /// The object's file is gone; `rows` pointed to it (now uncached).
    case missingObject(Hash128, rows: [Int])
    /// An object's file at `path` could not be read (`error`: a bad sector,
    /// a failed file-system checksum); it was set aside as `outcome` says
    /// and forgotten. `rows` named it.
    case unreadableObject(Hash128, path: String, SystemError, QuarantineOutcome, rows: [Int])
    /// The store's log or lock file was removed, replaced or cut while the
    /// store was open: writes stop (a write into a file nobody will read
    /// again would be acknowledged and lost) until the store is reopened.
    case writesStopped(String)
    /// The store directory, one of its parents or one of its own files could
    /// be changed by another user, or is a symbolic link: it is not opened.
    case untrusted(String)
    /// The directory holds files but no store: no `index.log` beginning with
    /// the log's header, and more than a store being created holds
    /// (`StoreIdentity`). `found` names the first unexpected entries (empty
    /// when `log` alone is the reason); `log` says what `index.log` is.
    /// Nothing in it was created, emptied or changed.
    case notAStore(directory: String, found: String, log: LogFinding)
    /// `index.log` was written by a newer cached: its header names a newer
    /// format version, or a record that passed its checksum holds a type or
    /// field value this version does not know (what was found, for example
    /// `index.log format version 3, this daemon reads version 2`). The store
    /// is not opened and nothing in it is cut, rewritten or saved aside
    /// (docs/storage-format.md, "Format evolution").
    case writtenByNewerVersion(String)
    /// A refresh handed the store posts or pages that break its rules (a
    /// caller's bug): a string id that is empty or longer than
    /// `PostID.maxStringBytes`, no pages, or page counts that do not add up
    /// to the items given. What was wrong; nothing was written.
    case invalidFeed(String)
    /// The store's file system has less than `min-free-space` free, or would
    /// have once an image of `needed` bytes (its announced length) is
    /// stored: the download is refused (or stopped, or not committed) so that
    /// the posts and the log keep room. `free` is what was found, `minimum` the setting.
    case belowHeadroom(free: Int64, minimum: Int64, needed: Int64)
    /// A posts refresh would write `needed` bytes (`files` post files, each
    /// rounded up to the file system's block, and their log records) and
    /// leave the store's file system less than `posts-min-free-space`
    /// (`minimum`) of the `free` it has: refused before anything is written.
    case postsBelowHeadroom(free: Int64, minimum: Int64, needed: Int64, files: Int)
    /// The daemon is stopping (`Store.stopPasses`): a long pass (`what`,
    /// with how far it got and what becomes of the rest) returned early,
    /// leaving the store as valid as before it began.
    case stopped(String)

    /// The error for a failure to open the index log: its refusal of a
    /// newer log becomes `.writtenByNewerVersion` (what was found), a failed
    /// call `.io`.
    public init(opening error: IndexLogError) {
        switch error {
        case .io(let e): self = .io(e)
        case .writtenByNewerVersion(let newer): self = .writtenByNewerVersion(newer.description)
        }
    }

    public var description: String {
        switch self {
        case .writtenByNewerVersion(let found):
            return "store written by a newer cached: \(found); nothing was cut or rewritten: "
                + "run that newer cached (or a later one) on it, or point this one at another --store"
        case .io(let e) where e.isNoSpace:
            return "store write failed, the disk is full: \(e)"
        case .io(let e):
            return "store I/O failed: \(e)"
        case let .locked(dir, pid):
            let holder = pid.map { "process \($0)" } ?? "another process"
            return "store \(dir) is in use by \(holder) (it holds the lock on the directory); stop it or choose another --store"
        case .notAnImage(let what):
            return "not an image: \(what)"
        case .tooLarge(let limit):
            return "larger than max-object-size \(formatSize(limit))"
        case let .corruptObject(hash, to, _):
            return "object \(hash) failed verification" + (to.map { "; moved to \($0)" } ?? "")
        case .missingObject(let hash, _):
            return "object \(hash) is not in the store"
        case let .unreadableObject(hash, path, error, outcome, _):
            return "object \(hash) could not be read from \(path): \(error.call): \(error.reason); \(outcome)"
        case .untrusted(let why):
            return "refusing to use the store: \(why)"
        case let .notAStore(dir, found, log):
            let entries = found.isEmpty ? "" : "; found \(found)"
            return "refusing to use \(dir) as the store: it is not empty and not a store cached made (\(log))\(entries); "
                + "nothing in it was changed: point --store at a new or empty directory, or at an existing store"
        case .writesStopped(let why):
            return "store writes stopped: \(why); nothing more is written until cached is restarted"
        case .invalidFeed(let what):
            return "refused to store the feed: \(what); nothing was written"
        case let .belowHeadroom(free, minimum, needed):
            let found = needed > free - minimum && free >= minimum
                ? "store has \(formatSize(free)) free, and this image of \(formatSize(needed)) would leave less than min-free-space \(formatSize(minimum))"
                : "store has \(formatSize(free)) free, under min-free-space \(formatSize(minimum))"
            return found + ": image downloads are refused until space is freed (gc, max-size, or a larger disk)"
        case .stopped(let what):
            return "the daemon is stopping: \(what)"
        case let .postsBelowHeadroom(free, minimum, needed, files):
            return "the posts refresh would write \(formatSize(needed)) (\(files) post file\(files == 1 ? "" : "s") and their log records) "
                + "and leave less than posts-min-free-space \(formatSize(minimum)) of the store's \(formatSize(free)) free; "
                + "the posts stay as they were (free space, lower posts-max-items, or a larger disk)"
        }
    }
}

/// What a directory's `index.log` is, when the directory is refused as not a store.
public enum LogFinding: Sendable, Equatable, CustomStringConvertible {
    /// There is no `index.log`.
    case missing
    /// `index.log` is not a regular file; what it is (`a symbolic link`).
    case notRegular(FileKind)
    /// `index.log` is a regular file that does not begin with the log's header.
    case withoutHeader

    /// The reason, as the refusal gives it.
    public var description: String {
        switch self {
        case .missing: "it holds no index.log"
        case .notRegular(let kind): "its index.log is \(kind), not a regular file"
        case .withoutHeader: "its index.log does not begin with the store's header"
        }
    }
}
