#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// Verified ranges: a part of an object is verified by the chunks it lies
/// in (`ChunkDigests`), not by hashing the whole object, so a 1-byte range
/// of a 64 MiB object hashes 1 MiB. What lies outside the range is neither
/// read nor sent, so damage there is found by the next read that covers it
/// (or `verify`), not by this one.
extension Store {
    /// Opens the object `hash` to send the `length` bytes from `offset`,
    /// having verified only the chunks those bytes lie in: each is read with
    /// `pread` and its XXH3-128 compared with the digest logged for it. A
    /// mismatch or a file of another size is handled as a whole object's
    /// mismatch is, a read error (EIO) as a whole read's (`openVerified`):
    /// the file is set aside (`setAsideFile`) and `corruptObject` or
    /// `unreadableObject` thrown; a missing file throws `missingObject`.
    /// Under `on-change`, a trusted file wholly in the page cache is not
    /// read at all (`trustsUnchanged`).
    ///
    /// An object without digests (one chunk or less, or stored before format
    /// version 4) is hashed whole instead, and for one larger than a chunk
    /// its digests are computed in that same pass and logged, so the next
    /// range needs no more. So is a range that does not lie within the
    /// object. The descriptor is the caller's; its position is 0.
    public func openVerifiedRange(_ hash: Hash128, offset: Int64, length: Int64) throws(StoreError) -> (FileDescriptor, Int64) {
        guard let ref = objectRef(hash) else { throw .missingObject(hash, rows: []) }
        let within = offset >= 0 && length > 0 && offset <= ref.size - length
        guard within, let digests = chunkDigests(hash), digests.fit(size: ref.size) else {
            return try openVerifiedWhole(ref)
        }
        let fd = try openObjectFile(hash)
        if trustsUnchanged(hash, fd, nil) {
            touch(hash)
            return (fd, ref.size)
        }
        do throws(StoreError) {
            try verifyChunks(fd, ref, digests, digests.chunks(offset: offset, length: length))
        } catch {
            fd.close()
            throw error
        }
        touch(hash)
        return (fd, ref.size)
    }

    /// The whole object verified, as today's reads do; one larger than a
    /// chunk without digests gets them from that same pass, logged (a
    /// failure to log them is warned and costs only a whole hash next time).
    private func openVerifiedWhole(_ ref: ObjectRef) throws(StoreError) -> (FileDescriptor, Int64) {
        guard ref.size > Self.chunkSize, lacksChunkDigests(ref.hash) else { return try openVerified(ref.hash) }
        let (fd, size, chunks) = try openVerifiedComputingChunks(ref.hash)
        if let chunks {
            do throws(StoreError) { try recordChunkDigests([(ref.hash, chunks)]) } catch {
                configuration.onWarning?("could not log the chunk digests of object \(ref.hash): \(error); it is hashed whole again next time")
            }
        }
        return (fd, size)
    }

    /// Checks the chunks `wanted` of the file behind `fd` against `digests`,
    /// and that the file is `ref.size` bytes, reading through one buffer of
    /// `hashingPiece` bytes whatever the chunk size the log names.
    private func verifyChunks(_ fd: FileDescriptor, _ ref: ObjectRef, _ digests: ChunkDigests,
                              _ wanted: ClosedRange<Int>) throws(StoreError) {
        let fileSize: Int64
        do throws(SystemError) { fileSize = try fd.size() } catch { throw unreadable(ref.hash, error, file: nil) }
        guard fileSize == ref.size else { throw corrupt(ref.hash, fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.hashingPiece, alignment: 64)
        defer { buffer.deallocate() }
        for i in wanted {
            let start = Int64(i) << Int64(digests.shift)
            let digest = try chunkDigest(fd, ref.hash, from: start, count: min(digests.chunkSize, ref.size - start), buffer)
            guard digest == digests.digests[i] else { throw corrupt(ref.hash, fd) }
        }
    }

    /// The XXH3-128 of the `count` bytes of the file from `start`, read
    /// through `buffer`. A read error or a short read is `unreadable`.
    private func chunkDigest(_ fd: FileDescriptor, _ hash: Hash128, from start: Int64, count: Int64,
                             _ buffer: UnsafeMutableRawBufferPointer) throws(StoreError) -> Hash128 {
        var hasher = StreamingHasher()
        var done: Int64 = 0
        while done < count {
            let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(min(Int64(buffer.count), count - done))])
            let n: Int
            do throws(SystemError) { n = try Self.readFully(fd, into: piece, at: start + done) } catch {
                throw unreadable(hash, error, file: Self.identity(of: fd))
            }
            // The file is the object's size (checked above): shorter now, it changed under the read.
            guard n == piece.count else { throw corrupt(hash, fd) }
            hasher.update(UnsafeRawBufferPointer(piece))
            done += Int64(n)
        }
        return hasher.digest()
    }
}
