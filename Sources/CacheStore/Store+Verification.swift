#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheSystem

/// Verified reads: an object is hashed before its bytes are served, and
/// one that does not match its name is moved to quarantine/.
extension Store {

    /// Opens an object after checking its bytes against its name. On a
    /// mismatch the file is moved to `quarantine/`, the object is forgotten
    /// (its rows become uncached) and `corruptObject` is thrown.
    public func openVerified(_ hash: Hash128) throws(StoreError) -> (FileDescriptor, Int64) {
        let path = objectPath(hash)
        let fd: FileDescriptor
        do throws(SystemError) { fd = try files.open(path, O_RDONLY) } catch {
            if error.errno == ENOENT {
                let rows = rowsReferencing(hash)
                try? forgetObject(hash)
                throw .missingObject(hash, rows: rows)
            }
            throw .io(error)
        }
        let digest: Hash128
        let size: Int64
        do throws(SystemError) {
            (digest, size) = try Store.hashFile(fd)
            try fd.seek(to: 0)
        } catch {
            fd.close()
            throw .io(error)
        }
        guard digest == hash else {
            fd.close()
            let rows = rowsReferencing(hash)
            throw .corruptObject(hash, quarantinedTo: quarantine(hash), rows: rows)
        }
        touch(hash)
        return (fd, size)
    }

    /// True when the file at `path` (never through a symbolic link) hashes to `hash`.
    func fileHolds(_ path: String, _ hash: Hash128) -> Bool {
        guard let fd = try? files.open(path, O_RDONLY) else { return false }
        defer { fd.close() }
        return (try? Store.hashFile(fd))?.0 == hash
    }

    /// XXH3-128 and length of a file from its current position (0). Large
    /// files are hashed through a read-only mapping: no copy into user memory,
    /// which matters on `read`, where the bytes are hashed before each send.
    static func hashFile(_ fd: FileDescriptor) throws(SystemError) -> (Hash128, Int64) {
        let length = try fd.size()
        if length >= 64 * 1024, let mapped = mmap(nil, Int(length), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd.rawValue, 0),
           mapped != MAP_FAILED {
            defer { munmap(mapped, Int(length)) }
            return (Hash128(of: UnsafeRawBufferPointer(start: mapped, count: Int(length))), length)
        }
        var hasher = StreamingHasher()
        var size: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            let n = try buffer.withMutableBytes { (raw) throws(SystemError) in try fd.read(into: raw) }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            size += Int64(n)
        }
        return (hasher.digest(), size)
    }

    /// The verified bytes of a small object, if reading them cannot block:
    /// all of it already in the page cache (preadv2 RWF_NOWAIT), and its hash
    /// matches. Nil means "take the slow path" (`openVerified` on a worker),
    /// which also handles every error and a mismatch.
    /// The bytes are read straight after `header(size)` in one buffer, which
    /// is returned whole: the answer line and its payload, ready to send.
    public func readVerifiedIfCached(_ hash: Hash128, upTo limit: Int, header: (Int) -> [UInt8]) -> [UInt8]? {
        guard let ref = state.withLock({ $0.objects[hash] }), ref.size <= limit else { return nil }
        guard let fd = try? files.open(Self.objectRelativePath(hash), O_RDONLY) else { return nil }
        defer { fd.close() }
        let size = Int(ref.size)
        let head = header(size)
        var ok = false
        // Header, then the file read straight into the same (uninitialised) buffer.
        let out = [UInt8](unsafeUninitializedCapacity: head.count + size + 1) { buffer, count in
            _ = buffer.initialize(from: head)
            ok = Store.readsWholeFromCache(fd, hash, size: size,
                                           into: UnsafeMutableRawBufferPointer(start: buffer.baseAddress! + head.count, count: size + 1))
            count = ok ? head.count + size : 0
        }
        guard ok else { return nil }
        touch(hash)
        return out
    }

    /// A small object opened and verified through that same descriptor, if
    /// reading it cannot block: all of it already in the page cache
    /// (preadv2 RWF_NOWAIT, which leaves the file's position at 0), and its
    /// hash matches. Nil means "take the slow path" (`openVerified` on a
    /// worker), which also handles every error and a mismatch. The caller
    /// owns the descriptor.
    public func openVerifiedIfCached(_ hash: Hash128, upTo limit: Int) -> (FileDescriptor, Int64)? {
        guard let ref = state.withLock({ $0.objects[hash] }), ref.size <= limit else { return nil }
        guard let fd = try? files.open(objectPath(hash), O_RDONLY) else { return nil }
        let size = Int(ref.size)
        let ok = withUnsafeTemporaryAllocation(byteCount: size + 1, alignment: 64) {
            Store.readsWholeFromCache(fd, hash, size: size, into: $0)
        }
        guard ok else {
            fd.close()
            return nil
        }
        touch(hash)
        return (fd, ref.size)
    }

    /// True when the file behind `fd` is exactly `size` bytes hashing to
    /// `hash`, read into `body` (`size + 1` bytes: one more is asked for,
    /// since a file that grew is not the object either) from the page cache
    /// alone (`preadv2(RWF_NOWAIT)` at offset 0, the position unmoved).
    /// EAGAIN, a short read (not all cached) or another size: false, and
    /// the slow path decides.
    static func readsWholeFromCache(_ fd: FileDescriptor, _ hash: Hash128, size: Int, into body: UnsafeMutableRawBufferPointer) -> Bool {
        let n = clinux_pread_nowait(fd.rawValue, body.baseAddress, UInt(body.count), 0)
        return n == size && Hash128(of: UnsafeRawBufferPointer(rebasing: body[0..<size])) == hash
    }

    /// A name in quarantine/ no other quarantined file has.
    func quarantineName(_ hash: Hash128) -> String {
        "\(quarantineDirectory)/\(hash.hex)-\(Clock.wallSeconds())-\(TempName.next(""))"
    }

    /// Moves an object's file to `quarantine/` and forgets it; returns where it went.
    @discardableResult
    public func quarantine(_ hash: Hash128) -> String? {
        let target = quarantineName(hash)
        let moved: String?
        do throws(SystemError) {
            try files.rename(objectPath(hash), target)
            try files.syncDirectory(quarantineDirectory)
            moved = target
        } catch { moved = nil }
        try? forgetObject(hash)
        return moved
    }
}
