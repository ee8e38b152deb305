#if canImport(Glibc)
import Glibc
#endif

/// Whether another user could change a file or directory this process
/// trusts, judged from its owner and mode: the rule and the messages
/// `TrustedDirectory` and `TrustedFile` share.
enum TrustedOwnership {
    /// What is judged; it decides what the message says another user could do.
    enum Subject {
        /// A file whose contents decide what this process does.
        case file
        /// A directory holding files this process trusts.
        case directory
    }

    /// Nil when `path` (of `owner` and `mode`) is owned by this process's
    /// effective user (or by root, when `allowRoot`) and neither group nor
    /// others can write it; a root-owned sticky directory (`/tmp`) that
    /// others can write passes when `allowSticky`. Otherwise what is wrong
    /// and how to fix it.
    static func problem(_ path: String, owner: uid_t, mode: mode_t, subject: Subject,
                        allowRoot: Bool = true, allowSticky: Bool = false) -> String? {
        let me = geteuid()
        if owner != me && !(allowRoot && owner == 0) {
            let owners = subject == .directory ? "uid \(me)" : me == 0 ? "root" : "root or uid \(me)"
            return "\(path) is owned by uid \(owner), not by \(owners) who runs this; that user \(subject.couldDo) (\(subject.ownerFix(path, me)))"
        }
        let sticky = mode & S_ISVTX != 0 && owner == 0
        if mode & (S_IWGRP | S_IWOTH) != 0 && !(allowSticky && sticky) {
            let who = mode & S_IWOTH != 0 ? "every user" : "its group"
            return "\(path) can be written by \(who) (mode \(String(mode & 0o7777, radix: 8))); another user \(subject.couldDo) (chmod go-w \(path))"
        }
        return nil
    }
}

extension TrustedOwnership.Subject {
    fileprivate var couldDo: String {
        switch self {
        case .file: "could change what it says"
        case .directory: "could replace what is in it"
        }
    }

    fileprivate func ownerFix(_ path: String, _ me: uid_t) -> String {
        switch self {
        case .file: "chown \(me) \(path) and chmod go-w \(path), or use a file of your own"
        case .directory: "have it removed, which in a sticky /tmp takes its owner or root; or chown \(me) \(path) and chmod 0700 \(path); "
            + "or choose another path, such as one under XDG_RUNTIME_DIR"
        }
    }
}
