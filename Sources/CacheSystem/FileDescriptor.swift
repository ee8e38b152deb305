#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// An owned-by-convention file descriptor with typed, errno-checked calls.
///
/// A value type in the spirit of swift-system's `FileDescriptor`: copying it
/// does not duplicate the descriptor, and `close()` must be called once.
public struct FileDescriptor: Sendable, Hashable {
    /// The raw descriptor number.
    public let rawValue: Int32
    /// The path it was opened from, kept for error messages.
    public let path: String

    public init(rawValue: Int32, path: String = "") {
        self.rawValue = rawValue
        self.path = path
    }

    /// Opens `path` with `flags` (`O_CLOEXEC` is always added).
    public static func open(_ path: String, _ flags: OpenFlags, mode: mode_t = 0o644) throws(SystemError) -> FileDescriptor {
        let fd = try retryingOnInterrupt("open", path) { Glibc.open(path, flags.rawValue | O_CLOEXEC, mode) }
        return FileDescriptor(rawValue: fd, path: path)
    }

    /// Opens a directory for `fsync` or `*at` calls.
    public static func openDirectory(_ path: String) throws(SystemError) -> FileDescriptor {
        try open(path, [.readOnly, .directory])
    }

    public func close() {
        _ = Glibc.close(rawValue)
    }

    /// Opens `name`, an entry of this directory as its listing gave it (one
    /// component: no `/`, not `.` or `..`), read-only, never through a
    /// symbolic link (`ELOOP`) and never waiting on a FIFO (`O_NONBLOCK`):
    /// one `openat` per entry of a large directory, no path walked.
    public func openEntry(_ name: String) throws(SystemError) -> FileDescriptor {
        let display = path + "/" + name
        guard !name.isEmpty, name != ".", name != "..", !name.utf8.contains(UInt8(ascii: "/")) else {
            throw SystemError("open", display, errno: EINVAL)
        }
        let fd = try retryingOnInterrupt("open", display) { Glibc.openat(rawValue, name, OpenFlags([.readOnly, .noFollow, .nonBlocking]).rawValue | O_CLOEXEC) }
        return FileDescriptor(rawValue: fd, path: display)
    }

    /// True when the file, from its position to its end, holds exactly
    /// `expected`: read into `buffer` (at least one byte) and compared as
    /// it comes, one byte more than is left asked for each time, so a file
    /// that differs early or runs longer stops the reading there.
    public func holds(_ expected: [UInt8], buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Bool {
        precondition(buffer.count > 0, "holds(_:buffer:) reads into an empty buffer")
        return try expected.withBytes { (want) throws(SystemError) -> Bool in
            var at = 0
            while true {
                let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(buffer.count, want.count - at + 1)]))
                if n == 0 { return at == want.count }
                guard at + n <= want.count, memcmp(buffer.baseAddress!, want.baseAddress! + at, n) == 0 else { return false }
                at += n
            }
        }
    }

    /// Reads up to `buffer.count` bytes; 0 means end of file.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try retryingOnInterrupt("read", path) { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reads up to `buffer.count` bytes at `offset` (`pread`: the file's
    /// position does not move); 0 means end of file.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        try retryingOnInterrupt("pread", path) { Glibc.pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Copies up to `count` bytes of this file from `offset` (which moves
    /// on by what was copied) to `out` at its position, inside the kernel
    /// (`copy_file_range`); 0 at the end of this file. Fails with `EXDEV`,
    /// `ENOSYS`, `EINVAL` or `EOPNOTSUPP` where the kernel cannot copy
    /// between these two files (then copy through memory).
    public func copyRange(to out: FileDescriptor, from offset: inout Int64, count: Int) throws(SystemError) -> Int {
        var off = offset
        let n = try retryingOnInterrupt("copy_file_range", path) { clinux_copy_file_range(rawValue, &off, out.rawValue, UInt(count)) }
        offset = off
        return n
    }

    /// Writes all of `bytes`, looping over short writes.
    public func writeAll(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        var done = 0
        while done < bytes.count {
            let n = try retryingOnInterrupt("write", path) {
                Glibc.write(rawValue, bytes.baseAddress! + done, bytes.count - done)
            }
            done += n
        }
    }

    public func writeAll(_ bytes: [UInt8]) throws(SystemError) {
        try bytes.withBytes { (raw) throws(SystemError) in try writeAll(raw) }
    }

    /// Reads the whole file from its current position. A regular file is
    /// read straight into a buffer of its size (a 300 MB log is not copied
    /// again each time a growing array doubles); one that grows meanwhile,
    /// or anything else, in pieces.
    public func readToEnd(limit: Int = Int.max) throws(SystemError) -> [UInt8] {
        var data: [UInt8] = []
        if let status = try? status(), status.isRegular, status.size > 0 {
            data.reserveCapacity(min(Int(status.size), limit) + 1)
        }
        var chunk = [UInt8](repeating: 0, count: 65536)
        while data.count < limit {
            // Into the reserved room while there is some: no copy through `chunk`.
            let room = min(data.capacity - data.count, limit - data.count)
            if room >= 4096 {
                let before = data.count
                var failure: SystemError?
                data.append(contentsOf: repeatElement(0, count: room))
                let n = data.withUnsafeMutableBytes { all -> Int in
                    do throws(SystemError) { return try read(into: UnsafeMutableRawBufferPointer(rebasing: all[before..<before + room])) } catch {
                        failure = error
                        return 0
                    }
                }
                data.removeLast(room - n)
                if let failure { throw failure }
                if n == 0 { break }
                continue
            }
            let n = try chunk.withMutableBytes { (raw) throws(SystemError) in try read(into: raw) }
            if n == 0 { break }
            data.append(contentsOf: chunk[0..<min(n, limit - data.count)])
        }
        return data
    }

    /// Flushes the file's data and metadata to the device.
    public func sync() throws(SystemError) {
        _ = try retryingOnInterrupt("fsync", path) { Glibc.fsync(rawValue) }
    }

    /// Flushes the file's data (and the size that reaches it) to the
    /// device: `fdatasync`, for a long write synced a piece at a time.
    public func syncData() throws(SystemError) {
        _ = try retryingOnInterrupt("fdatasync", path) { Glibc.fdatasync(rawValue) }
    }

    public func truncate(to size: Int64) throws(SystemError) {
        _ = try retryingOnInterrupt("ftruncate", path) { Glibc.ftruncate(rawValue, off_t(size)) }
    }

    @discardableResult
    public func seek(to offset: Int64, whence: Int32 = SEEK_SET) throws(SystemError) -> Int64 {
        Int64(try retryingOnInterrupt("lseek", path) { Glibc.lseek(rawValue, off_t(offset), whence) })
    }

    /// `fstat` of the open file.
    public func status() throws(SystemError) -> FileStatus {
        var st = stat()
        _ = try retryingOnInterrupt("fstat", path) { Glibc.fstat(rawValue, &st) }
        return FileStatus(st)
    }

    /// The size of the open file.
    public func size() throws(SystemError) -> Int64 {
        var st = stat()
        _ = try retryingOnInterrupt("fstat", path) { Glibc.fstat(rawValue, &st) }
        return Int64(st.st_size)
    }

    /// Takes an exclusive advisory lock without waiting; false when another holds it.
    public func tryLockExclusive() throws(SystemError) -> Bool {
        try retryingOnInterrupt("flock", path, nilOn: EWOULDBLOCK) { clinux_flock_exclusive_nb(rawValue) } != nil
    }

    /// Sets or clears `O_NONBLOCK`.
    public func setNonBlocking(_ on: Bool = true) throws(SystemError) {
        let flags = try retryingOnInterrupt("fcntl", path) { fcntl(rawValue, F_GETFL) }
        _ = try retryingOnInterrupt("fcntl", path) { fcntl(rawValue, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) }
    }
}
