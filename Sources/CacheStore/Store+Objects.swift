#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheSystem

/// Object writes and commits (through `GroupCommit`), and the object index's lookups.
extension Store {
    // MARK: Objects

    /// A temp file under `tmp/` to stream one download into.
    public func newObjectWriter(maxSize: Int64) throws(StoreError) -> ObjectWriter {
        try writingFiles { () throws(StoreError) -> ObjectWriter in
            do throws(SystemError) {
                return try ObjectWriter(tempPath: "\(tempDirectory)/\(TempName.next(".part"))", maxSize: maxSize, files: files,
                                        remove: { [weak self] path throws(SystemError) in try self?.removeTemp(path) },
                                        onWarning: configuration.onWarning)
            } catch { throw .io(error) }
        }
    }

    /// Makes a finished download durable and points `rows` at it, refusing
    /// bytes that are not an image with `StoreError.notAnImage` naming the
    /// origin's `declaredContentType` (nil: it sent none) and what the bytes
    /// look like. Whether they are an image depends on the bytes alone.
    /// `freshness`, when given, is logged for each row mapped (`rowFreshness`).
    public func commitObject(_ objectWriter: ObjectWriter, rows: [(row: Int, url: String)],
                             declaredContentType: String?, freshness: ImageFreshness? = nil) throws(StoreError) -> ObjectRef {
        try commitObject(objectWriter, rows: rows, declared: ImageType.declaration(declaredContentType), freshness: freshness)
    }

    /// Logs `freshness` for each of `rows` that still has its URL and still
    /// maps `ref` (the origin answered 304 to a revalidation of it), grouped
    /// with the object commits waiting (`GroupCommit`). Rows remapped or
    /// uncached meanwhile are left alone.
    public func refreshFreshness(_ ref: ObjectRef, rows: [(row: Int, url: String)], freshness: ImageFreshness) throws(StoreError) {
        try checkWritable()
        try commitGroup.commit(ref, rows: rows, freshness: freshness, refreshOnly: true) { (batch) throws(StoreError) in
            try writer.withLock { (w) throws(StoreError) in try logCommits(batch, &w) }
        }
    }

    /// Makes a finished download durable and points `rows` at it.
    ///
    /// The bytes must be an image (`ImageType.detect`). The file is fsynced and renamed
    /// to `objects/ab/<rest>` (or dropped if that object already exists), the
    /// directory is fsynced, and only then are the row mappings logged. Rows
    /// whose manifest URL changed since the download began are left alone.
    public func commitObject(_ objectWriter: ObjectWriter, rows: [(row: Int, url: String)]) throws(StoreError) -> ObjectRef {
        try commitObject(objectWriter, rows: rows, declared: nil)
    }

    func commitObject(_ objectWriter: ObjectWriter, rows: [(row: Int, url: String)], declared: String?,
                      freshness: ImageFreshness? = nil) throws(StoreError) -> ObjectRef {
        guard let type = objectWriter.imageType else {
            objectWriter.discard()
            throw .notAnImage(objectWriter.refusalDetail(declared: declared))
        }
        let ref = ObjectRef(hash: objectWriter.hash, size: objectWriter.size, type: type)
        try placing(ref) { () throws(StoreError) in
            try placeObject(objectWriter, ref)
            try commitGrouped(ref, rows: rows, freshness: freshness, chunks: objectWriter.chunkDigests)
        }
        return ref
    }

    /// Runs `body` with `ref` registered as a commit in flight, so that gc
    /// and eviction leave its file alone meanwhile (`unlinkObjectFile`).
    /// The last commit of a burst (none left in flight after it) evicts
    /// what the commits' own eviction had to spare (`evictSpared`).
    func placing(_ ref: ObjectRef, _ body: () throws(StoreError) -> Void) throws(StoreError) {
        pendingObjects.withLock { $0[ref.hash, default: 0] += 1 }
        do throws(StoreError) { try body() } catch {
            _ = donePlacing(ref.hash)
            throw error
        }
        if donePlacing(ref.hash) { evictSpared(keeping: ref.hash) }
    }

    /// Ends `hash`'s registration; true when no commit is in flight after it.
    private func donePlacing(_ hash: Hash128) -> Bool {
        pendingObjects.withLock { p in
            p[hash, default: 1] -= 1
            if p[hash] == 0 { p[hash] = nil }
            return p.isEmpty
        }
    }

    /// Puts the finished temp file in place as `objects/ab/<rest>`, durably:
    /// fsynced, renamed, its directory fsynced (or dropped when the same
    /// bytes are there already and hash right). Nothing is logged yet.
    func placeObject(_ objectWriter: ObjectWriter, _ ref: ObjectRef) throws(StoreError) {
        // The file part needs no lock: names are contents, so two commits of
        // the same bytes rename the same bytes to the same name.
        let path = objectPath(ref.hash)
        do throws(StoreError) {
            try writingFiles { () throws(StoreError) in try placeChecked(objectWriter, ref, path) }
        } catch {
            objectWriter.discard()
            throw error
        }
    }

    /// `placeObject` once writes are known to be allowed.
    private func placeChecked(_ objectWriter: ObjectWriter, _ ref: ObjectRef, _ path: String) throws(StoreError) {
        do throws(SystemError) {
            let existing = try files.status(path)
            // The same bytes are stored already (logged, or placed by a commit
            // still in flight): keep that file, but only once it proves to hold
            // them (`prefetch --force` must repair a copy damaged on disk, not
            // keep it and discard the good download).
            if let existing, existing.size == ref.size, fileHolds(path, ref.hash) {
                objectWriter.discard()
                trustCommitted(ref.hash, path)
            } else {
                try objectWriter.syncAndClose()
                if existing != nil {
                    // Damaged or foreign bytes under this name: a second name for
                    // them in quarantine/, then the good file renamed over the
                    // first in one step, so the name is never without a file.
                    try files.link(path, quarantineName(ref.hash))
                    try files.syncDirectory(quarantineDirectory)
                }
                let fanout = FileSystem.directoryName(of: path)
                try files.makeDirectory(fanout, mode: 0o700)
                try files.rename(objectWriter.tempPath, path)
                objectWriter.markDone()
                try files.syncDirectory(fanout)
                // objects/ too, the first time this process commits into a fan-out:
                // one that exists may be a concurrent commit's, not yet fsynced into
                // objects/, or one a killed daemon left unsynced.
                if !durableFanouts.withLock({ $0.contains(fanout) }) {
                    try files.syncDirectory(objectsDirectory)
                    durableFanouts.withLock { _ = $0.insert(fanout) }
                }
                trustCommitted(ref.hash, path)
            }
        } catch {
            objectWriter.discard()
            throw .io(error)
        }
    }

    /// Logs `ref`'s rows (and its chunk digests) with every other commit waiting (`GroupCommit`).
    func commitGrouped(_ ref: ObjectRef, rows: [(row: Int, url: String)], freshness: ImageFreshness? = nil,
                       chunks: ChunkDigests? = nil) throws(StoreError) {
        try commitGroup.commit(ref, rows: rows, freshness: freshness, chunks: chunks) { (batch) throws(StoreError) in
            try writer.withLock { (w) throws(StoreError) in try logCommits(batch, &w) }
        }
    }

    /// Logs the row mappings of `batch` (with their freshness, and each
    /// object's chunk digests unless the index has them) as one transaction
    /// and applies them. Rows whose manifest URL changed since their
    /// download began are left alone; a refresh only touches rows that
    /// still map its object.
    func logCommits(_ batch: [GroupCommit.Pending], _ w: inout WriterState) throws(StoreError) {
        let now = Clock.wallMilliseconds()
        let (current, chunked, known) = state.withLock { s in
            (s.rows, batch.map(\.ref.hash).filter { s.chunks[$0] != nil }, Set(batch.compactMap(\.variant?.key.source).filter { s.objects[$0] != nil }))
        }
        var records: [LogRecord] = []
        var digested = Set(chunked)
        for c in batch {
            if let v = c.variant {
                // A variant of an object forgotten meanwhile is not logged: its file is gc's.
                guard known.contains(v.key.source) else { continue }
                records.append(.variant(source: v.key.source, spec: v.key.spec, variant: VariantRef(object: c.ref, width: v.width, height: v.height)))
                records.append(.access(hash: c.ref.hash, time: now))
                if let chunks = c.chunks, digested.insert(c.ref.hash).inserted {
                    records.append(.objectChunks(hash: c.ref.hash, chunks: chunks))
                }
                continue
            }
            var mapped = c.rows.filter { current.indices.contains($0.row) && current[$0.row].url == $0.url }
            if c.refreshOnly { mapped = mapped.filter { current[$0.row].object?.hash == c.ref.hash } }
            for r in mapped {
                if !c.refreshOnly { records.append(.rowObject(row: r.row, hash: c.ref.hash, size: c.ref.size, type: c.ref.type)) }
                if let f = c.freshness { records.append(.rowFreshness(row: r.row, freshness: f)) }
            }
            guard !mapped.isEmpty && !c.refreshOnly else { continue }
            records.append(.access(hash: c.ref.hash, time: now))
            if let chunks = c.chunks, digested.insert(c.ref.hash).inserted {
                records.append(.objectChunks(hash: c.ref.hash, chunks: chunks))
            }
        }
        if !records.isEmpty { try append(records, &w) }
        state.withLock { $0.apply(transaction: records) }
        try evictIfNeeded(&w, keep: Set(batch.map(\.ref.hash)))
        try compactIfNeeded(&w)
    }

    /// For tests: the writer lock, to hold the log as a slow disk would.
    var writerForTests: Locked<WriterState> { writer }
    /// For tests: commits waiting for the log (queued or taken by the leader).
    var queuedCommitsForTests: Int { commitGroup.waiting }

    /// Log transactions written for object commits so far (group commit makes
    /// this smaller than the number of commits when they overlap).
    public var objectCommitTransactions: Int { commitGroup.transactions }

    /// The rows whose image is `hash` (a scan: only on the failure paths).
    func rowsReferencing(_ hash: Hash128) -> [Int] {
        state.withLock { s in s.rows.indices.filter { s.rows[$0].object?.hash == hash } }
    }

    /// Logs that an object is gone: every row pointing to it becomes uncached.
    public func forgetObject(_ hash: Hash128) throws(StoreError) {
        try writer.withLock { (w) throws(StoreError) in
            guard state.withLock({ $0.objects[hash] != nil }) else { return }
            try append([.objectRemoved(hash: hash)], &w)
            state.withLock { $0.apply(.objectRemoved(hash: hash)) }
            forgetCached([hash])
        }
    }

    /// The object named `hash`, if the index knows it.
    public func objectRef(_ hash: Hash128) -> ObjectRef? {
        state.withLock { $0.objects[hash] }
    }

    /// Drops every object whose file is missing or has the wrong size (one
    /// `lstat` each; the rows stay known and are fetched again on demand).
    /// Run at start, in the background. The stop flag (`stopPasses`) is
    /// looked at before each file: the objects found missing until then are
    /// still dropped, and the rest are looked at by the next start's sweep
    /// (or by the first request for each).
    @discardableResult
    public func dropMissingObjects() throws(StoreError) -> ObjectFilesReport {
        let refs = state.withLock { Array($0.objects.values) }
        var report = ObjectFilesReport(total: refs.count)
        var missing: [Hash128] = []
        for ref in refs {
            if stop.isRaised { report.stopped = true; break }
            report.checked += 1
            if !objectFileLooksRight(ref) { missing.append(ref.hash) }
        }
        guard !missing.isEmpty else { return report }
        report.dropped = try writer.withLock { (w) throws(StoreError) -> Int in
            let pending = pendingObjects.withLock { Set($0.keys) }
            let gone = missing.filter { h in !pending.contains(h) && state.withLock { $0.objects[h] != nil } }
                .filter { h in state.withLock { $0.objects[h] }.map { !objectFileLooksRight($0) } ?? false }
            guard !gone.isEmpty else { return 0 }
            try append(gone.map { .objectRemoved(hash: $0) }, &w)
            state.withLock { $0.removeObjects(Set(gone)) }
            forgetCached(Set(gone))
            return gone.count
        }
        return report
    }

    /// Every known object, for `verify`.
    public func knownObjects() -> [Hash128] {
        state.withLock { Array($0.objects.keys) }
    }
}
