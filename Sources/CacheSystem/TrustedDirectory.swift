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
        return TrustedOwnership.problem(path, owner: st.st_uid, mode: st.st_mode, subject: .directory,
                                        allowRoot: allowRoot, allowSticky: allowSticky)
    }

    /// Nil when every directory above `path` is owned by root or this user and
    /// writable by no one else (a root-owned sticky directory such as /tmp
    /// excepted): none of them lets another user move `path` aside and put
    /// their own in its place. A link among them is judged by its target; the
    /// link itself lives in the next directory up, which is checked too.
    ///
    /// When a link among them leads elsewhere, the directories above where it
    /// leads (the real path of `path`'s directory) are checked as well: a
    /// link is judged by its target, but a target in a directory others can
    /// write could be swapped all the same.
    public static func ancestorsProblem(of path: String) -> String? {
        let directory = FileSystem.directoryName(of: path)
        if let p = chainProblem(from: directory) { return p }
        let real: String
        // Every ancestor was just found: a failure here is a race, and refused.
        do throws(SystemError) { real = try FileSystem.realPath(directory) } catch { return "\(error)" }
        guard real != directory else { return nil }
        return chainProblem(from: real).map { "\($0) (where \(directory) leads)" }
    }

    /// The first of `directory` and the directories above it that is not trusted.
    private static func chainProblem(from directory: String) -> String? {
        var ancestor = directory
        while true {
            if let p = problem(ancestor, allowRoot: true, allowSticky: true, followLink: true) { return p }
            if ancestor == "/" || ancestor == "." || ancestor.isEmpty { return nil }
            ancestor = FileSystem.directoryName(of: ancestor)
        }
    }
}
