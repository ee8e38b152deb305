#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// The free space of the store's file system, for `min-free-space`.
extension Store {
    /// Bytes an unprivileged writer may still use on the store's file system
    /// (`fstatvfs` of the store directory: `f_bavail` blocks of `f_frsize`).
    public func freeSpace() throws(StoreError) -> Int64 { try space().free }

    /// The free bytes (as `freeSpace`) and the file system's block: the
    /// least room a file of one byte takes.
    func space() throws(StoreError) -> (free: Int64, block: Int64) {
        var s = statvfs()
        guard fstatvfs(directoryFD.rawValue, &s) == 0 else { throw .io(SystemError("fstatvfs", directory)) }
        let block = Int64(s.f_frsize == 0 ? s.f_bsize : s.f_frsize)
        let (bytes, overflow) = Int64(clamping: s.f_bavail).multipliedReportingOverflow(by: block)
        return (overflow ? Int64.max : bytes, max(block, 1))
    }

    /// Throws `StoreError.postsBelowHeadroom` when writing `files` (post
    /// files, each taking whole blocks) and their log records would leave
    /// the store's file system less than `minimum` free (0: never). A
    /// refresh that writes no file is never refused: it only shrinks the posts.
    func checkPostsHeadroom(_ minimum: Int64, files: [(name: String, bytes: [UInt8])]) throws(StoreError) {
        guard minimum > 0, !files.isEmpty else { return }
        let (free, block) = try space()
        // A log record holds the post's bytes, its id and about 40 bytes of framing.
        let needed = files.reduce(Int64(0)) { sum, f in
            let n = Int64(f.bytes.count)
            return sum + (n + block - 1) / block * block + n + 64 + Int64(f.name.utf8.count)
        }
        if free - needed < minimum { throw .postsBelowHeadroom(free: free, minimum: minimum, needed: needed, files: files.count) }
    }

    /// Throws `StoreError.belowHeadroom` when the store's file system has
    /// less than `minimum` bytes free (0: never), or would have after
    /// `needed` more bytes are written. The space under it is kept for the
    /// posts and the log: image downloads call this before they start, when
    /// their length is announced, while they stream and before they are committed.
    public func checkHeadroom(_ minimum: Int64, needed: Int64 = 0) throws(StoreError) {
        guard minimum > 0 else { return }
        let free = try freeSpace()
        if free - max(needed, 0) < minimum { throw .belowHeadroom(free: free, minimum: minimum, needed: needed) }
    }
}
