#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheSystem

/// Verified reads: an object is hashed before its bytes are served (or,
/// under `verify-reads = on-change`, trusted while its file is unchanged),
/// and one that does not match its name is moved to quarantine/.
extension Store {

    /// Opens an object after checking its bytes against its name. On a
    /// mismatch the file is moved to `quarantine/`, the object is forgotten
    /// (its rows become uncached) and `corruptObject` is thrown; on a read
    /// error (a bad sector, a failed file-system checksum) the same happens
    /// and `unreadableObject` is thrown (`quarantineUnreadable`).
    ///
    /// Under `verify-reads = on-change` (`readVerification`), a file hashed
    /// before whose identity (`FileIdentity`) has not changed and whose
    /// pages are all in the page cache is not hashed again; `rehash` hashes
    /// it whatever the mode (`verify`, the scrub). With `touching` false the
    /// object's use time is left as it was (the scrub: its reads are no use,
    /// and must not reorder eviction). With `stoppable` (the scrub,
    /// `verify`), the hash looks at the stop flag (`stopPasses`) before each
    /// piece it reads and, once it is raised, ends with `stopped`: the
    /// object is neither judged nor trusted.
    public func openVerified(_ hash: Hash128, rehash: Bool = false, touching: Bool = true,
                             stoppable: Bool = false) throws(StoreError) -> (FileDescriptor, Int64) {
        let fd = try openObjectFile(hash)
        let identity: FileIdentity
        do throws(SystemError) { identity = try fd.identity() } catch {
            fd.close()
            throw error.isMediaError ? unreadable(hash, error, file: nil) : .io(error)
        }
        if !rehash, trustsUnchanged(hash, fd, identity) {
            if touching { touch(hash) }
            return (fd, identity.size)
        }
        let hashed: (Hash128, Int64)?
        wholeHashes.withLock { $0 += 1 }
        do throws(SystemError) {
            hashed = try Store.hashFile(fd, stop: stoppable ? stop : nil)
        } catch {
            fd.close()
            // Any failure of a read of a regular file the store opened is the file's.
            throw unreadable(hash, error, file: identity)
        }
        guard let (digest, size) = hashed else {
            fd.close()
            throw .stopped("the check of object \(hash) was cut short")
        }
        guard digest == hash else {
            fd.close()
            throw setAsideFile(hash, file: identity, .mismatch)
        }
        trustIfChecked(hash, fd, identity)
        if touching { touch(hash) }
        return (fd, size)
    }

    /// True when the file at `path` (never through a symbolic link) hashes
    /// to `hash`. A read error is false, and reported (`noteReplacedUnreadable`).
    func fileHolds(_ path: String, _ hash: Hash128) -> Bool {
        // Not opened: not proven, so the caller puts the new download in its place.
        guard let fd = try? files.open(path, .readOnly) else { return false }
        defer { fd.close() }
        do throws(SystemError) { return try Store.hashFile(fd)?.0 == hash } catch {
            noteReplacedUnreadable(hash, error)
            return false
        }
    }


    /// XXH3-128 and length of a file from offset 0, read with `pread` into
    /// one buffer of `hashingPiece` bytes (below malloc's mmap threshold, and
    /// in the CPU's cache between the copy and the hash). Never through a memory mapping: a read error on a
    /// mapped page is a SIGBUS, or on btrfs a fault retried for ever (a
    /// worker spinning in the kernel, its request never answered), where
    /// `pread` returns `EIO` at once. Nil when `stop` was raised before a
    /// piece was read (a stop within one piece of any object, however large).
    static func hashFile(_ fd: FileDescriptor, stop: StopFlag? = nil) throws(SystemError) -> (Hash128, Int64)? {
        var hasher = StreamingHasher()
        var size: Int64 = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: hashingPiece, alignment: 64)
        defer { buffer.deallocate() }
        while true {
            if stop?.isRaised == true { return nil }
            let n = try fd.read(into: buffer, at: size)
            if n == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
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
    /// An object of at most 64 KiB read so is kept in memory and served from
    /// there next time (`SmallObjects`: hashed again under `always`).
    public func readVerifiedIfCached(_ hash: Hash128, upTo limit: Int, header: (Int) -> [UInt8]) -> [UInt8]? {
        guard let ref = state.withLock({ $0.objects[hash] }), ref.size <= limit else { return nil }
        let size = Int(ref.size)
        if let kept = smallObjects.withLock({ $0.get(hash) }), kept.count == size,
           readVerification.mode == .onChange || kept.withUnsafeBytes({ Hash128(of: $0) }) == hash {
            touch(hash)
            return header(size) + kept
        }
        // Not opened: nil, the slow path (`openVerified`), which meets and handles the error itself.
        guard let fd = try? files.open(Self.objectRelativePath(hash), .readOnly) else { return nil }
        defer { fd.close() }
        let trusted = readVerification.mode == .onChange && trustsUnchanged(hash, fd, nil, checkCache: false)
        let head = header(size)
        var ok = false
        // Header, then the file read straight into the same (uninitialised) buffer.
        let out = [UInt8](unsafeUninitializedCapacity: head.count + size + 1) { buffer, count in
            _ = buffer.initialize(from: head)
            ok = Store.readsWholeFromCache(fd, trusted ? nil : hash, size: size,
                                           into: UnsafeMutableRawBufferPointer(start: buffer.baseAddress! + head.count, count: size + 1))
            count = ok ? head.count + size : 0
        }
        guard ok else { return nil }
        if size <= SmallObjects.maxObjectSize { smallObjects.withLock { $0.put(hash, Array(out[head.count...])) } }
        touch(hash)
        return out
    }

    /// A small object opened and verified through that same descriptor, if
    /// reading it cannot block: all of it already in the page cache
    /// (preadv2 RWF_NOWAIT, which leaves the file's position at 0), and its
    /// hash matches. Nil means "take the slow path" (`openVerified` on a
    /// worker), which also handles every error and a mismatch. The caller
    /// owns the descriptor.
    /// Under `on-change`, any object trusted and wholly in the page cache
    /// is opened with nothing read (`openTrustedIfCached`); where the mode
    /// rests on the file system's own checksums (btrfs, ZFS), on its
    /// identity alone: nothing is read through the descriptor here, and
    /// whatever the client reads through it is either bytes the file system
    /// checked or `EIO`, whether they come from the page cache or the disk.
    public func openVerifiedIfCached(_ hash: Hash128, upTo limit: Int) -> (FileDescriptor, Int64)? {
        if readVerification.mode == .onChange,
           let opened = openTrustedIfCached(hash, cachedOrNot: readVerification.fileSystemChecksums) { return opened }
        guard let ref = state.withLock({ $0.objects[hash] }), ref.size <= limit else { return nil }
        // Not opened: nil, the slow path, as above.
        guard let fd = try? files.open(objectPath(hash), .readOnly) else { return nil }
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
    /// A nil `hash`: the file is trusted (`on-change`), its bytes are not hashed.
    static func readsWholeFromCache(_ fd: FileDescriptor, _ hash: Hash128?, size: Int, into body: UnsafeMutableRawBufferPointer) -> Bool {
        let n = clinux_pread_nowait(fd.rawValue, body.baseAddress, UInt(body.count), 0)
        guard n == size else { return false }
        guard let hash else { return true }
        return Hash128(of: UnsafeRawBufferPointer(rebasing: body[0..<size])) == hash
    }
}
