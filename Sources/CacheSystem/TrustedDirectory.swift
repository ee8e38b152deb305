#if canImport(Glibc)
import Glibc
#endif

/// Whether a directory may hold files this process trusts (a store, a
/// socket): another user who owns it or can write to it could plant
/// symbolic links or replace files in it.
public enum TrustedDirectory {
    /// Nil when `path` is a real directory (not a symbolic link) owned by this
    /// process's effective user (or by root, when `allowRoot`) that neither
    /// group nor others can write; otherwise the reason and how to fix it.
    /// A root-owned directory with the sticky bit (`/tmp`) is trusted as a
    /// parent when `allowSticky` is set: others cannot replace what we own there.
    /// With `followLink`, a symbolic link at `path` is judged by what it points to.
    public static func problem(_ path: String, allowRoot: Bool = true, allowSticky: Bool = false,
                               followLink: Bool = false) -> String? {
        var st = stat()
        let rc = followLink ? stat(path, &st) : lstat(path, &st)
        guard rc == 0 else { return "\(path): \(String(cString: strerror(errno)))" }
        if st.st_mode & S_IFMT == S_IFLNK {
            return "\(path) is a symbolic link; use the real directory it points to"
        }
        guard st.st_mode & S_IFMT == S_IFDIR else { return "\(path) is not a directory" }
        let me = geteuid()
        let ownerOK = st.st_uid == me || (allowRoot && st.st_uid == 0)
        if !ownerOK {
            return "\(path) is owned by uid \(st.st_uid), not by uid \(me) who runs this; another user could replace what is in it " +
                "(have it removed, which in a sticky /tmp takes its owner or root; or chown \(me) \(path) and chmod 0700 \(path); " +
                "or choose another path, such as one under XDG_RUNTIME_DIR)"
        }
        let writable = st.st_mode & (S_IWGRP | S_IWOTH) != 0
        let sticky = st.st_mode & S_ISVTX != 0 && st.st_uid == 0
        if writable && !(allowSticky && sticky) {
            return "\(path) can be written by \(st.st_mode & S_IWOTH != 0 ? "every user" : "its group") (mode \(String(st.st_mode & 0o7777, radix: 8))); " +
                "another user could replace what is in it (chmod go-w \(path))"
        }
        return nil
    }

    /// Nil when every directory above `path` is owned by root or this user and
    /// writable by no one else (a root-owned sticky directory such as /tmp
    /// excepted): none of them lets another user move `path` aside and put
    /// their own in its place. A link among them is judged by its target; the
    /// link itself lives in the next directory up, which is checked too.
    public static func ancestorsProblem(of path: String) -> String? {
        var ancestor = FileSystem.directoryName(of: path)
        while true {
            if let p = problem(ancestor, allowRoot: true, allowSticky: true, followLink: true) { return p }
            if ancestor == "/" || ancestor == "." || ancestor.isEmpty { return nil }
            ancestor = FileSystem.directoryName(of: ancestor)
        }
    }
}
