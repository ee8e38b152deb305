#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheSystem

/// The store on disk and its in-memory index.
///
/// Reads take a short lock on the index and never touch the log. Writes are
/// serialised by a writer lock and follow one recipe: files are written under
/// `tmp/`, fsynced, renamed into place and their directory fsynced; only then
/// is the log record that points to them appended and fsynced; only then does
/// the in-memory index change. A crash at any point leaves either the old
/// state or the new one.
public final class Store: Sendable {
    public let directory: String
    public let configuration: StoreConfiguration
    let state: Locked<StoreState>
    let writer: Locked<WriterState>
    let lockFD: FileDescriptor
    /// The store directory, open and flocked for as long as the store is.
    let directoryFD: FileDescriptor
    /// Every path of the store is resolved through this: beneath the store
    /// directory, never through a symbolic link.
    let files: ConfinedDirectory
    /// The log's record count, readable without waiting for a writer's fsync.
    let logRecords = Locked(0)
    /// Object commits waiting for the log, and who is writing them.
    let commitGroup = Monitor(CommitGroup())
    /// Objects renamed into objects/ whose log records are not written yet:
    /// gc must not take them for garbage.
    let pendingObjects = Locked<[Hash128: Int]>([:])
    /// Fan-out directories whose entry in objects/ this process has fsynced.
    let durableFanouts = Locked<Set<String>>([])

    struct CommitGroup {
        var queue: [PendingCommit] = []
        var results: [UInt64: Result<Void, StoreError>] = [:]
        var leading = false
        /// Commits the current leader is writing.
        var leaderBatch = 0
        var nextID: UInt64 = 0
        /// Log transactions written for object commits (each may hold many).
        var transactions = 0
    }

    struct PendingCommit: Sendable {
        var id: UInt64
        var ref: ObjectRef
        var rows: [(row: Int, url: String)]
    }

    /// What recovery cut from the log at open, if anything.
    public let recovery: LogRecovery?

    struct WriterState: @unchecked Sendable {
        var log: IndexLog
        /// Set once the log or lock was found removed or replaced: every later write fails.
        var stopped: String?
    }

    var postsDirectory: String { directory + "/posts" }
    var objectsDirectory: String { directory + "/objects" }
    public var tempDirectory: String { directory + "/tmp" }
    var quarantineDirectory: String { directory + "/quarantine" }

    /// Opens the store: takes the lock, creates the layout, empties `tmp/`,
    /// replays the log (cutting a damaged tail aside).
    public init(_ configuration: StoreConfiguration) throws(StoreError) {
        self.configuration = configuration
        do throws(SystemError) {
            try FileSystem.makeDirectories(configuration.directory, mode: 0o700)
            // The real path, resolved once: systemd's CacheDirectory= under
            // DynamicUser= is a link (/var/cache/cached -> private/cached), and a
            // trailing slash or a relative spelling must not skip the checks.
            // From here on the store is that directory, opened without links.
            directory = try FileSystem.realPath(configuration.directory)
        } catch { throw .io(error) }
        if let problem = StoreTrust.problem(directory) { throw .untrusted(problem) }
        do throws(SystemError) { files = try ConfinedDirectory(opening: directory) } catch { throw .io(error) }
        directoryFD = files.descriptor
        // The lock is taken on the store directory itself, which cannot be
        // deleted or replaced while it holds the store; `lock` only names the
        // holder (and keeps 0.1.0 daemons, which lock that file, out).
        var acquired: Bool
        do throws(SystemError) {
            acquired = try directoryFD.tryLockExclusive()
        } catch {
            directoryFD.close()
            throw .io(error)
        }
        guard acquired else {
            let text = (try? files.read("lock", limit: 32)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            directoryFD.close()
            throw .locked(directory: directory, holderPID: Int32(text.filter { $0.isNumber }))
        }
        do throws(SystemError) {
            lockFD = try files.open("lock", O_RDWR | O_CREAT, mode: 0o600)
        } catch {
            directoryFD.close()
            throw .io(error)
        }
        do throws(SystemError) {
            acquired = try lockFD.tryLockExclusive()
            if acquired {
                try lockFD.truncate(to: 0)
                try lockFD.writeAll(Array("\(getpid())\n".utf8))
            }
        } catch {
            lockFD.close()
            directoryFD.close()
            throw .io(error)
        }
        guard acquired else {
            let text = (try? lockFD.readToEnd(limit: 32)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            lockFD.close()
            directoryFD.close()
            throw .locked(directory: directory, holderPID: Int32(text.filter { $0.isNumber }))
        }

        var replayed = StoreState()
        let log: IndexLog
        do throws(SystemError) {
            var created = false
            for sub in ["posts", "objects", "tmp", "quarantine"] {
                if try files.makeDirectory(sub, mode: 0o700) { created = true }
            }
            // A subdirectory made now (a new store, or one someone deleted)
            // must be durable before anything is committed into it.
            if created { try files.descriptor.sync() }
            for name in try files.list("tmp") {
                try files.unlink("tmp/" + name)
            }
            log = try IndexLog(directory: files, name: "index.log") { transaction in
                replayed.apply(transaction: transaction)
            }
        } catch {
            lockFD.close()
            directoryFD.close()
            throw .io(error)
        }
        replayed.sortPosts()
        recovery = log.recovery
        state = Locked(replayed, rank: .storeState)
        writer = Locked(WriterState(log: log), rank: .storeWriter)
        logRecords.withLock { $0 = log.recordCount }
    }

    /// Releases the log and the locks. A second call does nothing (closing
    /// a descriptor number twice could close another file that reused it).
    public func close() {
        guard closed.withLock({ c -> Bool in defer { c = true }; return !c }) else { return }
        writer.withLock { $0.log.close() }
        lockFD.close()
        directoryFD.close()
    }
    let closed = Locked(false)
    /// Serialises the writers of `posts/` (a refresh, the start-up
    /// reconciliation). Taken before the writer lock, never after it.
    let postFiles = Locked((), rank: .postFiles)

    /// Why writes stopped, if they did (see `StoreError.writesStopped`).
    public var writesStopped: String? { writer.withLock { $0.stopped } }

    /// Checks that `index.log` and `lock` are still the files this store
    /// opened: not deleted, not replaced by another file, the log not cut
    /// shorter than what was written. Nil when they are.
    func replacedFiles(_ w: WriterState) -> String? {
        func check(_ name: String, _ fd: FileDescriptor, length: Int64?) -> String? {
            guard let open = try? fd.status() else { return "\(name) cannot be examined" }
            guard let named = try? files.status(name) else {
                return "\(directory)/\(name) was deleted while the daemon ran"
            }
            if !named.isSameFile(as: open) { return "\(directory)/\(name) was replaced by another file while the daemon ran" }
            if open.links == 0 { return "\(directory)/\(name) was deleted while the daemon ran" }
            if let length, open.size < length {
                return "\(directory)/\(name) was cut from \(length) to \(open.size) bytes while the daemon ran"
            }
            if let length, open.size > length {
                return "\(directory)/\(name) grew from \(length) to \(open.size) bytes by another writer while the daemon ran"
            }
            return nil
        }
        return check("index.log", w.log.descriptor, length: w.log.length) ?? check("lock", lockFD, length: nil)
    }

    // MARK: Reads

    /// The stored JSON of post `id`.
    public func post(id: Int64) -> [UInt8]? {
        state.withLock { $0.posts[id] }
    }

    /// Posts in ascending id order: the total and the requested page.
    public func posts(offset: Int, limit: Int) -> (total: Int, page: [[UInt8]]) {
        state.withLock { s in
            let total = s.sortedIDs.count
            let start = min(max(offset, 0), total)
            let end = min(total, start + max(0, min(limit, total)))
            return (total, s.sortedIDs[start..<end].map { s.posts[$0]! })
        }
    }

    public var postsKnown: Bool { state.withLock { $0.postsKnown } }

    /// Changes whenever a row's URL or the number of rows changes, so that
    /// derived tables (resolved URLs) know when to rebuild.
    public var manifestGeneration: Int { state.withLock { $0.manifestGeneration } }
    public var manifestKnown: Bool { state.withLock { $0.manifestKnown } }

    public func row(_ index: Int) -> Row? {
        state.withLock { s in s.rows.indices.contains(index) ? s.rows[index] : nil }
    }

    /// Rows from `offset`, at most `limit`: the total and the page.
    public func rows(offset: Int, limit: Int) -> (total: Int, page: [Row]) {
        state.withLock { s in
            let total = s.rows.count
            let start = min(max(offset, 0), total)
            let end = min(total, start + max(0, min(limit, total)))
            return (total, Array(s.rows[start..<end]))
        }
    }

    public func validators(for feed: Feed) -> Validators {
        state.withLock { $0.validators[feed] ?? Validators() }
    }

    /// Feeds whose logged validators held a control character or stray
    /// whitespace and were dropped when the log was replayed (the next
    /// refresh of each is unconditional and stores clean ones).
    public var damagedValidators: Set<Feed> {
        state.withLock { $0.damagedValidators }
    }

    /// The absolute path of an object's file: `objects/ab/<30 hex>`.
    public func objectPath(_ hash: Hash128) -> String {
        let hex = hash.hex
        return "\(objectsDirectory)/\(hex.prefix(2))/\(hex.dropFirst(2))"
    }

    /// Notes that an object was served (for eviction order). The time reaches
    /// the log with the next `logAccessTimes()`.
    public func touch(_ hash: Hash128) {
        let now = Clock.wallMilliseconds()
        state.withLock { s in
            guard s.objects[hash] != nil else { return }
            s.lastUse[hash] = now
            s.unloggedUse.insert(hash)
        }
    }

    /// Appends the use times noted since the last call, so that eviction order
    /// survives a restart (approximately: uses since the last call are lost
    /// in a crash). The daemon calls it every minute and at shutdown.
    public func logAccessTimes() throws(StoreError) {
        try writer.withLock { (w) throws(StoreError) in
            let records: [LogRecord] = state.withLock { s in
                let out = s.unloggedUse.sorted().compactMap { h in s.lastUse[h].map { LogRecord.access(hash: h, time: $0) } }
                s.unloggedUse.removeAll()
                return out
            }
            if !records.isEmpty { try append(records, &w) }
        }
    }

    /// True when the object's file exists with its recorded size (one `lstat`,
    /// no writes: safe on the event loop).
    public func objectFileLooksRight(_ ref: ObjectRef) -> Bool {
        guard let st = try? files.status(objectPath(ref.hash)) else { return false }
        return st.isRegular && st.size == ref.size
    }

    /// Like `objectFileLooksRight`, but a missing or truncated file is also
    /// dropped from the index (its rows become uncached). Writes the log.
    public func objectIsPresent(_ ref: ObjectRef) -> Bool {
        if objectFileLooksRight(ref) { return true }
        try? forgetObject(ref.hash)
        return false
    }

    public func stats() -> StoreStats {
        let records = logRecords.withLock { $0 }
        return state.withLock { s in
            StoreStats(posts: s.posts.count, rows: s.rows.count,
                       rowsCached: s.rows.reduce(0) { $0 + ($1.object == nil ? 0 : 1) },
                       objects: s.objects.count, bytes: s.bytes, logRecords: records, evictions: s.evictions)
        }
    }

    // MARK: Feed writes

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
                for (id, json) in posts {
                    newIDs.insert(id)
                    if current[id] == json { change.unchanged += 1; continue }
                    try files.writeDurably(json, to: postPath(id), tempDirectory: tempDirectory, syncDirectory: false)
                    written.append(id)
                    records.append(.post(id: id, json: json))
                    change.fetched += 1
                }
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
    /// files of posts the index does not hold. Returns how many were fixed.
    @discardableResult
    public func reconcilePostFiles() -> Int {
        postFiles.withLock { _ in
            let posts = state.withLock { $0.posts }
            var fixed = 0
            let names = (try? files.list(postsDirectory)) ?? []
            var seen = Set<Int64>()
            for name in names {
                guard name.hasSuffix(".json"), let id = Int64(name.dropLast(5)), let json = posts[id] else {
                    try? files.unlink("\(postsDirectory)/\(name)"); fixed += 1; continue
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

    /// Why writes stopped, readable without the writer lock.
    let stopReason = Locked<String?>(nil)
}
