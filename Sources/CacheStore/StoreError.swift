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
    /// The store's log or lock file was removed, replaced or cut while the
    /// store was open: writes stop (a write into a file nobody will read
    /// again would be acknowledged and lost) until the store is reopened.
    case writesStopped(String)
    /// The store directory, one of its parents or one of its own files could
    /// be changed by another user, or is a symbolic link: it is not opened.
    case untrusted(String)

    public var description: String {
        switch self {
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
        case .untrusted(let why):
            return "refusing to use the store: \(why)"
        case .writesStopped(let why):
            return "store writes stopped: \(why); nothing more is written until cached is restarted"
        }
    }
}

