#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheSystem

/// Eviction, gc and compaction, and the write path every log transaction takes.
extension Store {
    /// Evicts the least recently used objects past `max-size`, then the
    /// least recently used variants past `variant-max-size`; never `keep`
    /// (the batch just committed) nor a commit in flight.
    func evictIfNeeded(_ w: inout WriterState, keep: Set<Hash128>) throws(StoreError) {
        try evict(&w, limit: configuration.maxBytes, keep: keep) { s in (s.bytes, Array(s.objects.values)) }
        try evict(&w, limit: configuration.maxVariantBytes, keep: keep) { s in
            (s.variantBytes, s.variantObjects.keys.compactMap { s.objects[$0] })
        }
    }

    /// Evicts again once the last commit in flight has ended, if the store
    /// is still past `max-size` or `variant-max-size`. The group commit's
    /// eviction (`evictIfNeeded`) spares every commit in flight, so under
    /// many concurrent downloads the last batches alone can pass the cap,
    /// by at most what the commits in flight hold. Evicting as each commit
    /// ends would take the objects of commits just returned, before their
    /// callers read them, whenever the cap is smaller than the downloads in
    /// flight; at the end of a burst, the store comes back under the cap,
    /// sparing only the object just committed. The commit is durable
    /// already, so a failure here is a warning, not the commit's error; the
    /// next commit tries again.
    func evictSpared(keeping hash: Hash128) {
        let (maxBytes, maxVariants) = (configuration.maxBytes, configuration.maxVariantBytes)
        guard maxBytes > 0 || maxVariants > 0 else { return }
        let over = state.withLock { s in
            (maxBytes > 0 && s.bytes > maxBytes) || (maxVariants > 0 && s.variantBytes > maxVariants)
        }
        guard over else { return }
        do throws(StoreError) {
            try writer.withLock { (w) throws(StoreError) in try evictIfNeeded(&w, keep: [hash]) }
        } catch {
            if case .writesStopped = error { return }
            configuration.onWarning?("eviction past max-size failed (\(error)); the next commit tries again")
        }
    }

    /// Removes the least recently used of `candidates` until `total` is
    /// within `limit` (0: no limit).
    private func evict(_ w: inout WriterState, limit: Int64, keep: Set<Hash128>,
                       _ weighed: (StoreState) -> (total: Int64, candidates: [ObjectRef])) throws(StoreError) {
        guard limit > 0 else { return }
        let pending = pendingObjects.withLock { Set($0.keys) }
        let victims: [Hash128] = state.withLock { s in
            let (total, candidates) = weighed(s)
            guard total > limit else { return [] }
            var excess = total - limit
            var out: [Hash128] = []
            let order = candidates.filter { !keep.contains($0.hash) && !pending.contains($0.hash) }
                .sorted { (s.objects.lastUse($0.hash) ?? 0, $0.hash) < (s.objects.lastUse($1.hash) ?? 0, $1.hash) }
            for o in order where excess > 0 { out.append(o.hash); excess -= o.size }
            return out
        }
        guard !victims.isEmpty else { return }
        try append(victims.map { .objectRemoved(hash: $0) }, &w)
        state.withLock { s in
            s.removeObjects(Set(victims))
            s.evictions += victims.count
        }
        forgetCached(Set(victims))
        for (n, h) in victims.enumerated() {
            // The objects are forgotten in the log already: a file left is garbage.
            if stop.isRaised {
                configuration.onNotice?("eviction stopped after removing the files of \(NumberText.grouped(n)) of "
                                        + "\(NumberText.grouped(victims.count)) evicted objects; the next gc removes the rest")
                break
            }
            do throws(SystemError) { _ = try unlinkObjectFile(h) } catch {
                configuration.onWarning?("could not remove the file of evicted object \(h) (\(error)); gc removes it")
            }
        }
    }

    /// Removes the file of an object the index no longer holds, unless a
    /// commit of the same bytes is in flight. The check and the unlink happen
    /// together under the pending-commit lock, and `commitObject` registers
    /// there before it renames its file into place, so a file being placed
    /// (or deduplicated against) is never removed: a snapshot of the pending
    /// set taken earlier would miss commits that began after it. Returns
    /// false when the file was kept.
    func unlinkObjectFile(_ hash: Hash128) throws(SystemError) -> Bool {
        let path = objectPath(hash)
        let result = pendingObjects.withLock { p -> Result<Bool, SystemError> in
            guard p[hash] == nil else { return .success(false) }
            do throws(SystemError) { try files.unlink(path) } catch {
                return error.errno == ENOENT ? .success(true) : .failure(error)
            }
            return .success(true)
        }
        return try result.get()
    }

    // MARK: Maintenance

    /// Deletes object files no row references (nor a variant of an object
    /// a row references), and forgets such objects.
    public func collectGarbage() throws(StoreError) -> (removed: Int, freedBytes: Int64) {
        try writer.withLock { (w) throws(StoreError) -> (Int, Int64) in try collectGarbageLocked(&w) }
    }

    /// The stop flag (`stopPasses`) is looked at before gc begins and
    /// before each file: objects no row references are forgotten in the log
    /// first, in one transaction, so a gc cut short leaves only files of
    /// objects the index no longer names, which the next gc removes.
    func collectGarbageLocked(_ w: inout WriterState) throws(StoreError) -> (Int, Int64) {
        // Memory that no longer matches the log on disk decides nothing.
        try checkWritable(&w)
        if stop.isRaised { throw .stopped("gc did not start; run it again after the restart") }
        let pending = pendingObjects.withLock { Set($0.keys) }
        let (referenced, known) = state.withLock { s in (s.referencedObjects, Set(s.objects.keys)) }
        let keep = referenced.union(pending)
        let unreferenced = known.subtracting(keep)
        if !unreferenced.isEmpty {
            try append(unreferenced.sorted().map { .objectRemoved(hash: $0) }, &w)
            state.withLock { $0.removeObjects(unreferenced) }
            forgetCached(unreferenced)
        }
        let removal: ObjectFileRemoval
        do throws(SystemError) { removal = try removeUnreferencedObjectFiles(keep: keep) } catch { throw .io(error) }
        if let (done, of) = removal.stoppedAt {
            throw .stopped("gc stopped after removing \(NumberText.grouped(removal.removed)) files (\(formatSize(removal.freed))) "
                           + "in \(done) of \(of) fan-out directories; the next gc removes the rest")
        }
        return (removal.removed, removal.freed)
    }

    /// What `removeUnreferencedObjectFiles` did: the files removed and
    /// their bytes, and, when the stop flag cut it short, how many of the
    /// fan-out directories it had gone through.
    struct ObjectFileRemoval {
        var removed = 0
        var freed: Int64 = 0
        var stoppedAt: (done: Int, of: Int)?
    }

    /// Deletes the regular files in `objects/` named as objects (a fan-out
    /// directory of 2 hex digits, a file of the other 30) whose hash is not
    /// in `keep`; every other entry is left alone and noted (`ignored`).
    private func removeUnreferencedObjectFiles(keep: Set<Hash128>) throws(SystemError) -> ObjectFileRemoval {
        var out = ObjectFileRemoval()
        let fans = try files.list(objectsDirectory)
        for (n, fan) in fans.enumerated() {
            let dir = "\(objectsDirectory)/\(fan.name)"
            guard fan.kind == .directory, StoreNames.isFanOut(fan.name) else {
                ignored.note(dir, fan.kind)
                continue
            }
            var changed = false
            defer { if changed { try? files.syncDirectory(dir) } }
            for entry in try files.list(dir) {
                if stop.isRaised {
                    out.stoppedAt = (n, fans.count)
                    return out
                }
                let path = "\(dir)/\(entry.name)"
                guard let h = StoreNames.objectHash(fanOut: fan.name, name: entry.name), entry.kind == .regular else {
                    ignored.note(path, entry.kind)
                    continue
                }
                if keep.contains(h) { continue }
                guard let st = try files.status(path) else { continue }
                // A commit that began after `keep` was read may be placing this file.
                guard try unlinkObjectFile(h) else { continue }
                out.freed += st.size
                out.removed += 1
                changed = true
            }
            if changed {
                changed = false
                try files.syncDirectory(dir)
            }
        }
        return out
    }

    /// Rewrites the log with only the records that rebuild the current state.
    public func compact() throws(StoreError) -> (before: Int, after: Int) {
        try writer.withLock { (w) throws(StoreError) -> (Int, Int) in
            try compactLocked(&w)
        }
    }

    /// The stop flag (`stopPasses`) is looked at before it begins and
    /// while the new log is encoded and written (`IndexLog.rewrite`): the
    /// rename over `index.log` is the commit point, so a compaction cut
    /// short leaves the old log, valid and whole, and no temp file.
    func compactLocked(_ w: inout WriterState) throws(StoreError) -> (Int, Int) {
        // A log replaced under us must not be overwritten by a rewrite either.
        try checkWritable(&w)
        let before = w.log.recordCount
        let what = "compaction of index.log (\(NumberText.grouped(before)) records)"
        if stop.isRaised { throw .stopped("\(what) did not start; it runs when it is next due") }
        // A snapshot (its storage shared, not copied: the writer's lock,
        // held, keeps the posts as they are), encoded as it is written.
        let (snapshot, order) = state.withLock { ($0, $0.rewrittenOrder) }
        do throws(SystemError) {
            try w.log.rewrite(tempDirectory: tempDirectory, stop: stop) { (emit) throws(SystemError) in try snapshot.forEachLiveTransaction(emit) }
        } catch {
            guard error.errno == ECANCELED, stop.isRaised else { throw .io(error) }
            throw .stopped("\(what) stopped before its rewrite replaced the log; index.log is as it was, and compaction runs again when it is next due")
        }
        // Memory now describes the new log: its recorded order is what was written.
        state.withLock { $0.recordedOrder = order }
        w.compactedLength = w.log.length
        let after = w.log.recordCount
        logRecords.withLock { $0 = after }
        return (before, after)
    }

}
