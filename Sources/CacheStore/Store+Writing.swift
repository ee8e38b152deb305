#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheSystem

/// The write path: every write checks the store is still the one opened,
/// appends one checksummed transaction and fsyncs it (docs/storage-format.md,
/// "Write order"); the feeds' writes (posts, the manifest).
extension Store {

    /// Throws `writesStopped` once the log or lock was found removed,
    /// replaced or changed (checking them now): the start of every write,
    /// so nothing is written to files, the log or the disk after that.
    func checkWritable(_ w: inout WriterState) throws(StoreError) {
        if let why = w.stopped { throw .writesStopped(why) }
        if let why = replacedFiles(w) {
            w.stopped = why
            stopReason.withLock { $0 = why }
            configuration.onWritesStopped?(why)
            throw .writesStopped(why)
        }
    }

    /// For writers that do not hold the writer lock (post files, an object's
    /// file): fails once writes stopped. It takes no writer lock, so a slow
    /// log never holds up the file part; the log append checks the files.
    func checkWritable() throws(StoreError) {
        if let why = stopReason.withLock({ $0 }) { throw .writesStopped(why) }
    }

    /// Appends one transaction and publishes the new record count. The log
    /// and lock are checked after the fsync: a transaction that went into a
    /// file that was deleted, replaced or cut meanwhile is not acknowledged,
    /// and no later write is accepted.
    func append(_ records: [LogRecord], _ w: inout WriterState) throws(StoreError) {
        // Before (a cut log would be silently refilled from the old offset)
        // and after the write (a file deleted meanwhile).
        try checkWritable(&w)
        do { try w.log.append(records) } catch { throw .io(error) }
        if let why = replacedFiles(w) {
            w.stopped = why
            configuration.onWritesStopped?(why)
            throw .writesStopped(why)
        }
        let count = w.log.recordCount
        logRecords.withLock { $0 = count }
    }

    func compactIfNeeded(_ w: inout WriterState) throws(StoreError) {
        let live = state.withLock { $0.posts.count + $0.rows.count * 2 + $0.objects.count + 4 }
        if w.log.recordCount > 2 * live + configuration.compactionSlack {
            _ = try compactLocked(&w)
            _ = try collectGarbageLocked(&w)
        }
    }

    /// Makes the stored posts equal to `posts` (id and exact JSON bytes) in one
    /// transaction, together with the feed's validators.
    public func replacePosts(_ posts: [(id: Int64, json: [UInt8])], validators unchecked: Validators) throws(StoreError) -> PostsChange {
        let validators = unchecked.sanitized
        // The post files are written under `postFiles`, not the writer lock:
        // a large refresh (one fsync per changed post) must not hold up object
        // commits, evictions or gc. Only the log transaction takes the writer
        // lock. Posts change nowhere else, so the snapshot below stays current.
        return try postFiles.withLock { (_) throws(StoreError) -> PostsChange in
            try checkWritable()
            let (current, known, oldValidators) = state.withLock { ($0.posts, $0.postsKnown, $0.validators[.posts]) }
            var change = PostsChange()
            var records: [LogRecord] = []
            var newIDs = Set<Int64>()
            var written: [Int64] = []
            do throws(SystemError) {
                var changed: [(id: Int64, json: [UInt8])] = []
                for (id, json) in posts {
                    newIDs.insert(id)
                    if current[id] == json { change.unchanged += 1; continue }
                    changed.append((id, json))
                    records.append(.post(id: id, json: json))
                    change.fetched += 1
                }
                try writePostFiles(changed, &written)
                let removed = current.keys.filter { !newIDs.contains($0) }.sorted()
                for id in removed { records.append(.postRemoved(id: id)) }
                change.removed = removed.count
                if records.isEmpty && known && oldValidators == validators { return change }
                records.append(.validators(feed: .posts, etag: validators.etag, lastModified: validators.lastModified))
                if !written.isEmpty { try files.syncDirectory(postsDirectory) }
            } catch {
                // The log still describes the old posts: put their files back.
                restorePostFiles(written, from: current)
                throw .io(error)
            }
            do throws(StoreError) {
                try writer.withLock { (w) throws(StoreError) in
                    try append(records, &w)
                    state.withLock { s in
                        s.apply(transaction: records)
                        s.sortPosts()
                    }
                    try compactIfNeeded(&w)
                }
            } catch {
                if state.withLock({ $0.posts == current }) { restorePostFiles(written, from: current) }
                throw error
            }
            for r in records { if case let .postRemoved(id) = r { try? files.unlink(postPath(id)) } }
            if change.removed > 0 { try? files.syncDirectory(postsDirectory) }
            return change
        }
    }

    func postPath(_ id: Int64) -> String { "\(postsDirectory)/\(id).json" }

    /// Threads writing post files at once. Each writes, fsyncs and renames
    /// its share of the files one after the other; concurrent fsyncs on one
    /// file system share journal commits. On ext4 here: about 1,400 files a
    /// second one by one, 7,000 with 16 threads (more did not help).
    static let postFileWriters = 16

    /// Writes every post durably to `posts/<id>.json` (temp file, fsync,
    /// rename; the caller fsyncs the directory), noting each id renamed into
    /// place in `written`, also when one fails: then the others stop, and
    /// the first failure is thrown once every writer has returned.
    func writePostFiles(_ posts: [(id: Int64, json: [UInt8])], _ written: inout [Int64]) throws(SystemError) {
        let outcome = Locked<(done: [Bool], failure: SystemError?)>((Array(repeating: false, count: posts.count), nil))
        Threads.parallel(count: posts.count, threads: Store.postFileWriters) { [self] i in
            guard outcome.withLock({ $0.failure == nil }) else { return }
            do throws(SystemError) {
                try files.writeDurably(posts[i].json, to: postPath(posts[i].id), tempDirectory: tempDirectory, syncDirectory: false)
                outcome.withLock { $0.done[i] = true }
            } catch {
                outcome.withLock { if $0.failure == nil { $0.failure = error } }
            }
        }
        let (done, failure) = outcome.withLock { $0 }
        for (i, post) in posts.enumerated() where done[i] { written.append(post.id) }
        if let failure { throw failure }
    }

    func restorePostFiles(_ ids: [Int64], from posts: [Int64: [UInt8]]) {
        for id in ids {
            if let old = posts[id] {
                try? files.writeDurably(old, to: postPath(id), tempDirectory: tempDirectory)
            } else {
                try? files.unlink(postPath(id))
            }
        }
    }

    /// Brings `posts/` in line with the index: rewrites files whose bytes
    /// differ (a crash between writing a file and its log record) and removes
    /// files of posts the index does not hold. Only regular files named
    /// `<id>.json` are the store's: anything else is left alone and noted
    /// (`ignored`). Returns how many were fixed.
    @discardableResult
    public func reconcilePostFiles() -> Int {
        postFiles.withLock { _ in
            let posts = state.withLock { $0.posts }
            var fixed = 0
            let entries = (try? files.list(postsDirectory)) ?? []
            var seen = Set<Int64>()
            for entry in entries {
                let path = "\(postsDirectory)/\(entry.name)"
                let id = StoreNames.postID(fileName: entry.name)
                guard let id, entry.kind == .regular else {
                    ignored.note(path, entry.kind)
                    if let id { seen.insert(id) }  // not replaced either
                    continue
                }
                guard let json = posts[id] else {
                    try? files.unlink(path); fixed += 1; continue
                }
                seen.insert(id)
                if (try? files.read(postPath(id))) != json {
                    try? files.writeDurably(json, to: postPath(id), tempDirectory: tempDirectory, syncDirectory: false)
                    fixed += 1
                }
            }
            for (id, json) in posts where !seen.contains(id) {
                try? files.writeDurably(json, to: postPath(id), tempDirectory: tempDirectory, syncDirectory: false)
                fixed += 1
            }
            if fixed > 0 { try? files.syncDirectory(postsDirectory) }
            return fixed
        }
    }

    /// Makes the stored manifest equal to `rows` (URL and description per row)
    /// in one transaction. Rows whose URL is unchanged keep their cached image.
    /// Returns how many rows changed.
    @discardableResult
    public func replaceManifest(_ rows: [(url: String, description: String?)], validators unchecked: Validators) throws(StoreError) -> Int {
        let validators = unchecked.sanitized
        return try writer.withLock { (w) throws(StoreError) -> Int in
            let (current, known, oldValidators) = state.withLock { ($0.rows, $0.manifestKnown, $0.validators[.manifest]) }
            var records: [LogRecord] = []
            for (i, row) in rows.enumerated() where i >= current.count || current[i].url != row.url || current[i].description != row.description {
                records.append(.row(row: i, url: row.url, description: row.description))
            }
            let changed = records.count + max(0, current.count - rows.count)
            if changed == 0 && known && oldValidators == validators { return 0 }
            records.insert(.manifestSize(count: rows.count), at: 0)
            records.append(.validators(feed: .manifest, etag: validators.etag, lastModified: validators.lastModified))
            try append(records, &w)
            state.withLock { $0.apply(transaction: records) }
            try compactIfNeeded(&w)
            return changed
        }
    }
}
