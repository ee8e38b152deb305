#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Which file this is and whether it changed: device, inode, size, and
/// the modification and change times to the nanosecond. Any write through
/// the file system moves `ctime` (and a `touch` that sets `mtime` back
/// still moves `ctime`), so two equal identities mean the file's bytes were
/// not changed through the file system in between.
public struct FileIdentity: Sendable, Hashable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    public var modified: Int64
    public var changed: Int64

    public init(device: UInt64, inode: UInt64, size: Int64, modified: Int64, changed: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modified = modified
        self.changed = changed
    }

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modified = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        changed = Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec)
    }
}

extension FileDescriptor {
    /// `fstat` of the open file, as its identity.
    public func identity() throws(SystemError) -> FileIdentity {
        var st = stat()
        _ = try retryingOnInterrupt("fstat", path) { Glibc.fstat(rawValue, &st) }
        return FileIdentity(st)
    }

    /// True when every page of the file's first `length` bytes is in the
    /// page cache and up to date (`mincore` of a mapping never touched), so
    /// reading them cannot wait for the disk and cannot fail there; false
    /// when some are not (a page whose read failed is not up to date), or
    /// the kernel cannot tell.
    public func isCached(length: Int64) -> Bool {
        clinux_pages_uptodate(rawValue, UInt64(max(0, length))) == 1
    }

    /// True when the file has btrfs's `NOCOW` attribute (`chattr +C`):
    /// btrfs keeps no checksums of its data.
    public var isNoCopyOnWrite: Bool {
        var flags: UInt32 = 0
        guard clinux_file_flags(rawValue, &flags) == 0 else { return false }
        return flags & clinux_nocow_flag() != 0
    }

    /// `fstatfs(2)`'s `f_type`: the magic number of the file system holding the file.
    public func fileSystemType() throws(SystemError) -> Int64 {
        var type: Int64 = 0
        _ = try retryingOnInterrupt("fstatfs", path) { clinux_fs_type(rawValue, &type) }
        return type
    }
}

extension SystemError {
    /// The symbolic name of a media error's errno (`EIO`) or of a few other
    /// common ones (`ENOENT`, `EACCES`, `ENOMEM`), else `errno N`.
    public static func errnoName(_ e: Int32) -> String {
        switch e {
        case EIO: "EIO"
        case EBADMSG: "EBADMSG"
        case EUCLEAN: "EUCLEAN"
        case ENODATA: "ENODATA"
        case EREMOTEIO: "EREMOTEIO"
        case ENXIO: "ENXIO"
        case ENOENT: "ENOENT"
        case EACCES: "EACCES"
        case ENOMEM: "ENOMEM"
        default: "errno \(e)"
        }
    }

    /// The reason in words with its symbolic name: `Input/output error (EIO, errno 5)`.
    public var reason: String {
        let name = SystemError.errnoName(errno)
        return "\(String(cString: strerror(errno))) (" + (name.hasPrefix("errno") ? name : "\(name), errno \(errno)") + ")"
    }

    /// True for the errors a storage device or a file system reports for
    /// bytes it cannot give back: a bad sector or a failed data checksum
    /// (`EIO`; `EBADMSG` and `EUCLEAN`, which ext4 and XFS use for
    /// checksum and corruption failures; `ENODATA`, `EREMOTEIO`, `ENXIO`
    /// from a device that went away). Not a full disk, not a missing file,
    /// not a lack of descriptors or memory.
    public var isMediaError: Bool {
        switch errno {
        case EIO, EBADMSG, EUCLEAN, ENODATA, EREMOTEIO, ENXIO: true
        default: false
        }
    }
}
