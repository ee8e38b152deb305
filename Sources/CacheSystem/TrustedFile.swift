#if canImport(Glibc)
import Glibc
#endif

/// Whether a file that decides what this process does (its configuration)
/// may be read: another user who owns it or can write it, or who can replace
/// it in a directory above it, could choose the settings of a daemon that
/// may run as root. The same rule as for the store directory (`TrustedDirectory`).
public enum TrustedFile {
    /// Nil when the open file `fd`, named `path`, is a regular file owned by
    /// this process's effective user or by root that neither group nor others
    /// can write, and every directory above `path` (and above its real path,
    /// when a directory above it is a link) is trusted (`TrustedDirectory.ancestorsProblem`);
    /// otherwise what is wrong and how to fix it. The file is judged through
    /// its descriptor, so what is judged is what is read.
    public static func problem(_ fd: FileDescriptor, path: String) -> String? {
        let st: FileStatus
        do throws(SystemError) { st = try fd.status() } catch { return "\(path): \(error)" }
        guard st.isRegular else { return "\(path) is not a regular file" }
        let me = geteuid()
        if st.owner != me && st.owner != 0 {
            let owners = me == 0 ? "root" : "root or uid \(me)"
            return "\(path) is owned by uid \(st.owner), not by \(owners) who runs this; that user could change what it says " +
                "(chown \(me) \(path) and chmod go-w \(path), or use a file of your own)"
        }
        if st.mode & (S_IWGRP | S_IWOTH) != 0 {
            let who = st.mode & S_IWOTH != 0 ? "every user" : "its group"
            return "\(path) can be written by \(who) (mode \(String(st.mode & 0o7777, radix: 8))); another user could change what it says " +
                "(chmod go-w \(path))"
        }
        if let p = TrustedDirectory.ancestorsProblem(of: path) { return "a directory above \(path): \(p)" }
        guard let real = try? FileSystem.realPath(path), real != path else { return nil }
        return TrustedDirectory.ancestorsProblem(of: real).map { "a directory above \(real) (where \(path) leads): \($0)" }
    }
}
