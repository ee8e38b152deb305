#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheSystem

/// The write path: every write checks the store is still the one opened,
/// appends one checksummed transaction and fsyncs it (docs/storage-format.md,
/// "Write order"), moving the log to a newer format version first when the
/// transaction needs it; the manifest's writes (the posts': `Store+Posts`).
extension Store {

    /// Throws `writesStopped` once the log or lock was found removed,
    /// replaced or changed (checking them now): the start of every write,
    /// so nothing is written to files, the log or the disk after that.
    func checkWritable(_ w: inout WriterState) throws(StoreError) {
        if let why = w.stopped { throw .writesStopped(why) }
        if let why = replacedFiles(w) { throw stopWrites(why, &w) }
    }

    /// Stops every later write for `why` (`writesStopped`), says so once
    /// (`onWritesStopped`), and returns the error to throw.
    func stopWrites(_ why: String, _ w: inout WriterState) -> StoreError {
        w.stopped = why
        stopReason.withLock { $0 = why }
        configuration.onWritesStopped?(why)
        return .writesStopped(why)
    }

    /// For writers that do not hold the writer lock (post files, an object's
    /// file): fails once writes stopped. It takes no writer lock, so a slow
    /// log never holds up the file part; the log append checks the files.
    func checkWritable() throws(StoreError) {
        if let why = stopReason.withLock({ $0 }) { throw .writesStopped(why) }
    }

    /// Appends one transaction and publishes the new record count. A
    /// transaction holding a record the log's format version does not (a
    /// string id, an order, pages: version 2; a freshness: 3; chunk
    /// digests: 4) first moves the log to that version (`upgradeLog`).
    /// The log and lock are checked after the fsync:
    /// a transaction that went into a file that was deleted, replaced or cut
    /// meanwhile is not acknowledged, and no later write is accepted.
    func append(_ records: [LogRecord], _ w: inout WriterState) throws(StoreError) {
        // Before (a cut log would be silently refilled from the old offset)
        // and after the write (a file deleted meanwhile).
        try checkWritable(&w)
        let needed = records.reduce(RecordCodec.firstFormatVersion) { max($0, $1.formatVersion) }
        if needed > w.log.version { try upgradeLog(to: needed, &w) }
        do throws(SystemError) { try w.log.append(records) } catch {
            if let cut = w.log.uncutTail {
                _ = stopWrites("\(directory)/\(StoreNames.logFile) ends in a transaction whose append failed (\(error)) "
                               + "and that could not be cut off (\(cut))", &w)
            }
            throw .io(error)
        }
        if let why = replacedFiles(w) { throw stopWrites(why, &w) }
        let count = w.log.recordCount
        logRecords.withLock { $0 = count }
    }

    /// Rewrites the log whole under format `version`, holding the current
    /// state (as compaction does: temp file, fsync, rename, directory
    /// fsync), before a record of that version is appended. Until then an
    /// older cached can still open the store (docs/storage-format.md,
    /// "Format evolution").
    func upgradeLog(to version: UInt8, _ w: inout WriterState) throws(StoreError) {
        let (snapshot, order) = state.withLock { ($0, $0.rewrittenOrder) }
        do throws(SystemError) {
            try w.log.rewrite(atLeast: version, tempDirectory: tempDirectory) { (emit) throws(SystemError) in try snapshot.forEachLiveTransaction(emit) }
        } catch {
            throw .io(error)
        }
        state.withLock { $0.recordedOrder = order }
        w.compactedLength = w.log.length
        let count = w.log.recordCount
        logRecords.withLock { $0 = count }
    }

    func compactIfNeeded(_ w: inout WriterState) throws(StoreError) {
        // Stopping: it is due again at the first write after the next start.
        if stop.isRaised { return }
        let live = state.withLock { $0.posts.count + $0.rows.count * 2 + $0.objects.count + $0.chunks.count + 4 }
        // By records (many small changes) or by bytes (few large ones: a
        // string-id feed whose order changes logs its whole order each time).
        if w.log.recordCount > 2 * live + configuration.compactionSlack
            || w.log.length > 2 * w.compactedLength + configuration.compactionSlackBytes {
            do throws(StoreError) {
                _ = try compactLocked(&w)
                _ = try collectGarbageLocked(&w)
            } catch {
                // The write it follows is logged: a stop cuts only the upkeep short.
                guard case .stopped(let what) = error else { throw error }
                configuration.onNotice?(what)
            }
        }
    }

    /// Throws `invalidFeed` unless `ids` are valid ids (a string id not
    /// empty and at most `PostID.maxStringBytes` bytes) and `pages` describe
    /// a feed of `items` items: at least one page, no count below 0, the
    /// counts adding up to `items`.
    static func check(_ ids: some Sequence<PostID>, items: Int, pages: [FeedPage], feed: String) throws(StoreError) {
        for case .string(let s) in ids where PostID(string: s) == nil {
            throw .invalidFeed("a post id of \(s.utf8.count) bytes (1 to \(PostID.maxStringBytes) are allowed)")
        }
        guard !pages.isEmpty else { throw .invalidFeed("the \(feed) feed was given no pages (it has \(items) items)") }
        if let bad = pages.firstIndex(where: { $0.count < 0 }) {
            throw .invalidFeed("page \(bad) of the \(feed) feed has a count of \(pages[bad].count)")
        }
        let sum = pages.reduce(0) { $0 + $1.count }
        guard sum == items else {
            throw .invalidFeed("the counts of the \(feed) feed's \(pages.count) pages add up to \(sum), but \(items) items were given")
        }
    }

    /// Makes the stored manifest equal to `rows` (URL and description per
    /// row) and its pages to `pages` (whose counts add up to `rows.count`)
    /// in one transaction. Rows whose URL is unchanged keep their cached
    /// image. Writes nothing when nothing changed and the manifest is known.
    /// Returns how many rows changed.
    ///
    /// A row whose URL was another row's before keeps that row's object and
    /// freshness (logged in the same transaction): the manifest of a feed
    /// that lists newest first shifts every row by one at each new post, and
    /// the images, by URL, are the same.
    @discardableResult
    public func replaceManifest(_ rows: [(url: String, description: String?)], pages unchecked: [FeedPage]) throws(StoreError) -> Int {
        try Self.check(EmptyCollection<PostID>(), items: rows.count, pages: unchecked, feed: "manifest")
        let pages = unchecked.map(\.sanitized)
        return try writer.withLock { (w) throws(StoreError) -> Int in
            let (current, known, stored, damaged) = state.withLock {
                ($0.rows, $0.manifestKnown, $0.pages[.manifest], $0.damagedValidators.contains(.manifest))
            }
            var records: [LogRecord] = []
            var cachedByURL: [String: Row]?
            for (i, row) in rows.enumerated() where i >= current.count || current[i].url != row.url || current[i].description != row.description {
                records.append(.row(row: i, url: row.url, description: row.description))
                // A URL that moved to another row keeps its image: rows
                // shifted by one new at the top are not downloaded again.
                guard i >= current.count || current[i].url != row.url, !row.url.isEmpty else { continue }
                if cachedByURL == nil { cachedByURL = Self.cachedRowsByURL(current) }
                if let moved = cachedByURL?[row.url] { records += Self.mapping(of: moved, to: i) }
            }
            let changed = records.reduce(0) { n, r in if case .row = r { n + 1 } else { n } } + max(0, current.count - rows.count)
            let pagesChanged = damaged || stored != StoredPages(pages)
            if changed == 0 && known && !pagesChanged { return 0 }
            records.insert(.manifestSize(count: rows.count), at: 0)
            if pagesChanged { records += StoreState.pageRecords(.manifest, pages) }
            try append(records, &w)
            state.withLock { $0.apply(transaction: records) }
            try compactIfNeeded(&w)
            return changed
        }
    }

    /// The cached rows of `rows` by URL (the first row of each URL).
    static func cachedRowsByURL(_ rows: ChunkedArray<Row>) -> [String: Row] {
        var out: [String: Row] = [:]
        for r in rows where r.object != nil && !r.url.isEmpty && out[r.url] == nil { out[r.url] = r }
        return out
    }

    /// The records that map row `i` to `cached`'s object, with its freshness.
    static func mapping(of cached: Row, to i: Int) -> [LogRecord] {
        guard let ref = cached.object else { return [] }
        var records: [LogRecord] = [.rowObject(row: i, hash: ref.hash, size: ref.size, type: ref.type)]
        if let f = cached.freshness { records.append(.rowFreshness(row: i, freshness: f)) }
        return records
    }
}
