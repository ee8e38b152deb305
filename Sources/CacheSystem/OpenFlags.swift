#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// How a file is opened: open(2)'s access mode and the flags cached uses,
/// by name. `O_CLOEXEC` is always added by the calls that take these
/// (`FileDescriptor.open`, `ConfinedDirectory.open`), so it is not one.
/// The access mode is one of `readOnly` (the empty set: `O_RDONLY` is 0),
/// `writeOnly` and `readWrite`.
public struct OpenFlags: OptionSet, Sendable, Hashable {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `O_RDONLY`, which is no bit: the empty set.
    public static let readOnly: OpenFlags = []
    /// `O_WRONLY`.
    public static let writeOnly = OpenFlags(rawValue: O_WRONLY)
    /// `O_RDWR`.
    public static let readWrite = OpenFlags(rawValue: O_RDWR)
    /// `O_CREAT`: made when missing, with the call's mode.
    public static let create = OpenFlags(rawValue: O_CREAT)
    /// `O_EXCL`: with `create`, refused (`EEXIST`) when the path exists.
    public static let exclusive = OpenFlags(rawValue: O_EXCL)
    /// `O_APPEND`: every write lands at the end.
    public static let append = OpenFlags(rawValue: O_APPEND)
    /// `O_TRUNC`: an existing file opened for writing is cut to nothing.
    public static let truncate = OpenFlags(rawValue: O_TRUNC)
    /// `O_DIRECTORY`: refused (`ENOTDIR`) unless a directory.
    public static let directory = OpenFlags(rawValue: O_DIRECTORY)
    /// `O_NOFOLLOW`: a symbolic link as the last component is refused (`ELOOP`).
    public static let noFollow = OpenFlags(rawValue: O_NOFOLLOW)
    /// `O_NONBLOCK`: opening a FIFO does not wait for a writer.
    public static let nonBlocking = OpenFlags(rawValue: O_NONBLOCK)
    /// `O_NOCTTY`: a terminal never becomes the controlling one.
    public static let noControllingTerminal = OpenFlags(rawValue: O_NOCTTY)
    /// `O_PATH`: a location only, for `*at` calls and `fstat`; no I/O.
    public static let pathOnly = OpenFlags(rawValue: clinux_o_path())
}
