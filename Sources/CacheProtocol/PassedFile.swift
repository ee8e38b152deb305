#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// The check of a descriptor the daemon passes with an `open` answer: it
/// must be a regular file of exactly the size announced, or a client that
/// copies "size bytes" from it could be fed without end (a passed
/// `/dev/zero`, a pipe) or be handed another object.
public enum PassedFile {
    /// Nil when `file` is a regular file of `size` bytes; otherwise what it
    /// is instead ("not a regular file (a character device)", "a file of 10
    /// bytes, not the 318 announced").
    public static func problem(_ file: FileDescriptor, size: Int64) -> String? {
        let status: FileStatus
        do { status = try file.status() } catch { return "a descriptor fstat refuses: \(error)" }
        guard status.isRegular else { return "not a regular file (\(kind(status.mode)))" }
        guard status.size == size else {
            return "a file of \(status.size) bytes, not the \(size) announced (changed since it was verified, or not the object's file)"
        }
        return nil
    }

    /// The kind of file `mode` names, for a file that is not regular.
    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFIFO: "a pipe"
        case S_IFSOCK: "a socket"
        case S_IFDIR: "a directory"
        default: "mode \(String(mode, radix: 8))"
        }
    }
}
