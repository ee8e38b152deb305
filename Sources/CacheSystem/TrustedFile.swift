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
    /// can write (`TrustedOwnership`), and every directory above `path` (and
    /// above where a link among them leads) is trusted (`TrustedDirectory.ancestorsProblem`);
    /// otherwise what is wrong and how to fix it. The file is judged through
    /// its descriptor, so what is judged is what is read.
    public static func problem(_ fd: FileDescriptor, path: String) -> String? {
        let st: FileStatus
        do throws(SystemError) { st = try fd.status() } catch { return "\(path): \(error)" }
        guard st.isRegular else { return "\(path) is not a regular file" }
        if let p = TrustedOwnership.problem(path, owner: st.owner, mode: st.mode, subject: .file) { return p }
        return TrustedDirectory.ancestorsProblem(of: path).map { "a directory above \(path): \($0)" }
    }

    /// `problem`, and for a file that holds secrets (credentials) also
    /// refused when its group or others can read it: it must be mode 0600
    /// or 0400 (systemd's `LoadCredential=` makes it 0400).
    public static func secretProblem(_ fd: FileDescriptor, path: String) -> String? {
        if let p = problem(fd, path: path) { return p }
        let st: FileStatus
        do throws(SystemError) { st = try fd.status() } catch { return "\(path): \(error)" }
        guard st.mode & (S_IRGRP | S_IROTH) != 0 else { return nil }
        let who = st.mode & S_IROTH != 0 ? "every user" : "its group"
        return "\(path) can be read by \(who) (mode \(String(st.mode & 0o7777, radix: 8))); it holds secrets that no other user "
            + "may read (chmod go-rw \(path))"
    }
}
