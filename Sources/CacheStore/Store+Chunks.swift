#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// Chunk digests outside a commit: an object stored without them (before
/// format version 4) gets them the first time it is hashed whole anyway,
/// in that same pass, and they are logged then. No object is downloaded
/// again for this (docs/storage-format.md, "Format evolution").
extension Store {
    /// Bytes per chunk of the digests the store records: 1 MiB.
    public static var chunkSize: Int64 { Int64(1) << Int64(ChunkDigests.defaultShift) }

    /// Bytes read at a time when chunks are hashed: below malloc's mmap
    /// threshold (128 KiB by default, 1 MiB as the daemon sets it), so the
    /// buffer is memory reused from one read to the next,
    /// not fresh pages faulted in on each (a 1 MiB buffer spent a quarter of
    /// a 1-byte range's time in page faults), and small enough to stay in
    /// the CPU's cache between the copy and the hash.
    static let hashingPiece = 64 * 1024

    /// The chunk digests the index holds for the object `hash`, if any.
    public func chunkDigests(_ hash: Hash128) -> ChunkDigests? {
        state.withLock { $0.chunks[hash] }
    }

    /// True when `hash` is a known object larger than one chunk whose chunk
    /// digests the index lacks (stored by a daemon of format version 3 or
    /// older, or whose digests could not be logged).
    public func lacksChunkDigests(_ hash: Hash128) -> Bool {
        state.withLock { s in s.objects[hash].map { $0.size > Self.chunkSize && s.chunks[hash] == nil } ?? false }
    }

    /// Opens an object and hashes it whole against its name, as
    /// `openVerified` does (and with its handling of a mismatch, a read
    /// error or a missing file), computing its chunk digests in the same
    /// pass (read a piece at a time with `pread`). Logs nothing: the digests
    /// (nil for an object of one chunk or less) are for `recordChunkDigests`.
    /// The caller owns the descriptor.
    public func openVerifiedComputingChunks(_ hash: Hash128, touching: Bool = true) throws(StoreError) -> (FileDescriptor, Int64, ChunkDigests?) {
        let fd = try openObjectFile(hash)
        let identity = Self.identity(of: fd)
        let found: (hash: Hash128, size: Int64, chunks: ChunkDigests?)
        wholeHashes.withLock { $0 += 1 }
        do throws(SystemError) { found = try Self.hashFileInChunks(fd) } catch {
            fd.close()
            throw unreadable(hash, error, file: identity)
        }
        guard found.hash == hash else {
            fd.close()
            throw setAsideFile(hash, file: identity, .mismatch)
        }
        if let identity { trustIfChecked(hash, fd, identity) }
        if touching { touch(hash) }
        return (fd, found.size, found.chunks)
    }

    /// Logs, as one transaction, the digests in `found` of objects the index
    /// still holds without digests and whose size they fit; the others are
    /// dropped. The log moves to format version 4 first when it is older.
    public func recordChunkDigests(_ found: [(hash: Hash128, chunks: ChunkDigests)]) throws(StoreError) {
        guard !found.isEmpty else { return }
        try writer.withLock { (w) throws(StoreError) in
            let records: [LogRecord] = state.withLock { s in
                found.filter { f in s.chunks[f.hash] == nil && s.objects[f.hash].map { f.chunks.fit(size: $0.size) } == true }
                    .map { .objectChunks(hash: $0.hash, chunks: $0.chunks) }
            }
            guard !records.isEmpty else { return }
            try append(records, &w)
            state.withLock { $0.apply(transaction: records) }
            try compactIfNeeded(&w)
        }
    }

    /// The object's file opened read-only beneath the store. A missing one
    /// is forgotten (if still missing: `forgetIfFileGone`) and
    /// `missingObject` thrown; a media error (`EIO` on open) sets it aside.
    func openObjectFile(_ hash: Hash128) throws(StoreError) -> FileDescriptor {
        do throws(SystemError) { return try files.open(objectPath(hash), .readOnly) } catch {
            if error.errno == ENOENT {
                let rows = rowsReferencing(hash)
                forgetIfFileGone(hash)
                throw .missingObject(hash, rows: rows)
            }
            if error.isMediaError { throw unreadable(hash, error, file: nil) }
            throw .io(error)
        }
    }

    /// The file behind `fd` does not hold object `hash`'s bytes: set aside
    /// (if its name still holds that file) and the error that says so.
    func corrupt(_ hash: Hash128, _ fd: FileDescriptor) -> StoreError {
        setAsideFile(hash, file: Self.identity(of: fd), .mismatch)
    }

    /// XXH3-128, length and chunk digests of a file from offset 0, in one
    /// pass (`ObjectHasher`): read with `pread`, `hashingPiece` bytes at a
    /// time, each piece hashed into the whole and, past the first chunk,
    /// into its chunk while it is in the CPU's cache. Not mapped: a read
    /// error must be an error, not a SIGBUS.
    static func hashFileInChunks(_ fd: FileDescriptor) throws(SystemError) -> (hash: Hash128, size: Int64, chunks: ChunkDigests?) {
        var hasher = ObjectHasher()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: hashingPiece, alignment: 64)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while true {
            let n = try readFully(fd, into: buffer, at: offset)
            if n == 0 { break }
            let piece = UnsafeRawBufferPointer(rebasing: buffer[..<n])
            hasher.update(piece)
            offset += Int64(n)
            if n < buffer.count { break }
        }
        return (hasher.hash, offset, hasher.digestsSoFar)
    }

    /// Reads into all of `buffer` from `offset`, looping over short reads;
    /// fewer bytes only at the end of the file. The count read.
    static func readFully(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + Int64(done))
            if n == 0 { break }
            done += n
        }
        return done
    }
}
