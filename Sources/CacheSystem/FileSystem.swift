#if canImport(Glibc)
import Glibc
#endif

/// Path-level file system calls with typed errors, and the durable-write recipe.
public enum FileSystem {
    /// Creates `path` with `mode` if it does not exist (not its parents).
    public static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws(SystemError) {
        if Glibc.mkdir(path, mode) != 0 && errno != EEXIST { throw SystemError("mkdir", path) }
    }

    /// Creates `path` and any missing parents. Each directory created has its
    /// parent fsynced, so that its entry survives a power loss (a store
    /// directory the daemon created would otherwise vanish with everything in
    /// it); a parent that cannot be opened for reading is left unsynced.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(SystemError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            let parent = prefix.isEmpty ? "/" : prefix
            prefix += "/" + part
            if Glibc.mkdir(prefix, mode) == 0 {
                // Best effort, as documented: a parent this process cannot
                // open (no read permission) cannot be fsynced by it at all.
                try? syncDirectory(parent)
            } else if errno != EEXIST {
                throw SystemError("mkdir", prefix)
            }
        }
    }

    public static func rename(_ from: String, _ to: String) throws(SystemError) {
        if Glibc.rename(from, to) != 0 { throw SystemError("rename", "\(from) -> \(to)") }
    }

    /// Removes a file; a missing file is not an error.
    public static func unlink(_ path: String) throws(SystemError) {
        if Glibc.unlink(path) != 0 && errno != ENOENT { throw SystemError("unlink", path) }
    }

    /// Flushes a directory's entries (after a rename or unlink in it).
    public static func syncDirectory(_ path: String) throws(SystemError) {
        let fd = try FileDescriptor.openDirectory(path)
        defer { fd.close() }
        try fd.sync()
    }

    /// The names in a directory, without `.` and `..`.
    public static func list(_ path: String) throws(SystemError) -> [String] {
        guard let dir = opendir(path) else { throw SystemError("opendir", path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// `lstat` facts about a path, or nil when it does not exist.
    public static func status(_ path: String) throws(SystemError) -> FileStatus? {
        var st = stat()
        if Glibc.lstat(path, &st) != 0 {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw SystemError("lstat", path)
        }
        return FileStatus(st)
    }

    /// Reads a whole file.
    public static func read(_ path: String, limit: Int = Int.max) throws(SystemError) -> [UInt8] {
        let fd = try FileDescriptor.open(path, [.readOnly, .noFollow])
        defer { fd.close() }
        return try fd.readToEnd(limit: limit)
    }

    /// The canonical absolute path of an existing `path`: every link and
    /// `.`/`..` resolved (realpath(3)).
    public static func realPath(_ path: String) throws(SystemError) -> String {
        guard let resolved = Glibc.realpath(path, nil) else { throw SystemError("realpath", path) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Everything before the last `/`.
    public static func directoryName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

/// What `lstat` says about a path.
public struct FileStatus: Sendable {
    public var size: Int64
    public var mode: mode_t
    /// Device and inode: which file this is, whatever its name.
    public var device: UInt64 = 0
    public var inode: UInt64 = 0
    /// Links to it; 0 for an open file that was deleted.
    public var links: UInt64 = 0
    public var owner: uid_t = 0

    public init(size: Int64, mode: mode_t) {
        self.size = size
        self.mode = mode
    }

    public init(_ st: stat) {
        size = Int64(st.st_size)
        mode = st.st_mode
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        links = UInt64(st.st_nlink)
        owner = st.st_uid
    }

    /// True when `other` is the same file (device and inode).
    public func isSameFile(as other: FileStatus) -> Bool { device == other.device && inode == other.inode }
    public var isSymbolicLink: Bool { mode & S_IFMT == S_IFLNK }
    public var isDirectory: Bool { mode & S_IFMT == S_IFDIR }
    public var isRegular: Bool { mode & S_IFMT == S_IFREG }
    public var isSocket: Bool { mode & S_IFMT == S_IFSOCK }
    /// What kind of entry this is.
    public var kind: FileKind { FileKind(mode: mode) }
}

/// What a directory entry is, as a listing or `lstat` tells it.
public enum FileKind: Sendable, Equatable, CustomStringConvertible {
    case regular, directory, symbolicLink
    /// A FIFO, socket or device.
    case special

    /// The kind of a file of `mode` (`st_mode`).
    public init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regular
        case S_IFDIR: self = .directory
        case S_IFLNK: self = .symbolicLink
        default: self = .special
        }
    }

    /// How a log line names it: "a file", "a directory", "a symbolic link", "a special file".
    public var description: String {
        switch self {
        case .regular: "a file"
        case .directory: "a directory"
        case .symbolicLink: "a symbolic link"
        case .special: "a special file"
        }
    }
}

/// Unique names for temp files: pid, a process-wide counter and the time.
public enum TempName {
    private static let counter = Locked<UInt64>(0)
    public static func next(_ suffix: String = ".tmp") -> String {
        let n = counter.withLock { value -> UInt64 in value += 1; return value }
        return "\(getpid())-\(n)-\(Clock.monotonicNanoseconds() % 1_000_000_000)\(suffix)"
    }

    /// True for a name `next(suffix)` makes: three decimal numbers joined by
    /// `-` (pid, counter, time), then `suffix`.
    public static func matches(_ name: String, suffix: String) -> Bool {
        guard name.hasSuffix(suffix) else { return false }
        let numbers = name.utf8.dropLast(suffix.utf8.count).split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        return numbers.count == 3 && numbers.allSatisfy { !$0.isEmpty && $0.count <= 20 && $0.allSatisfy(ASCII.isDigit) }
    }
}
