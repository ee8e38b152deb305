#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheSystem

/// A cached image: which object holds a row's bytes.
public struct ObjectRef: Sendable, Hashable {
    public var hash: Hash128
    public var size: Int64
    public var type: ImageType
}

/// One row of the image manifest, as the store knows it.
public struct Row: Sendable, Equatable {
    /// The URL as written in the manifest (possibly relative).
    public var url: String
    public var description: String?
    /// The cached object, or nil when the row is not cached.
    public var object: ObjectRef?
}

/// HTTP validators kept per feed for conditional requests.
public struct Validators: Sendable, Equatable {
    public var etag: String?
    public var lastModified: String?
    public init(etag: String? = nil, lastModified: String? = nil) {
        self.etag = etag
        self.lastModified = lastModified
    }

    /// These validators less any value that is not a safe HTTP field value
    /// (`HTTPFieldValue.isSafe`): such a value would split the conditional
    /// request header it is sent in, so it is never stored or sent.
    public var sanitized: Validators {
        Validators(etag: etag.flatMap { HTTPFieldValue.isSafe($0) ? $0 : nil },
                   lastModified: lastModified.flatMap { HTTPFieldValue.isSafe($0) ? $0 : nil })
    }

    /// True when `sanitized` would drop a value.
    public var isDamaged: Bool { sanitized != self }

    /// The ETag stored for a feed whose server cannot match its own ETags
    /// (it answers them with a full 200): an empty one, never sent, so the
    /// feed is revalidated with Last-Modified alone, also after a restart.
    public static let ignoredETag = ""

    /// True when the feed's ETags are not to be sent (`ignoredETag`).
    public var etagIgnored: Bool { etag == Validators.ignoredETag }
}

/// Counts for `status`.
public struct StoreStats: Sendable {
    public var posts: Int
    public var rows: Int
    public var rowsCached: Int
    public var objects: Int
    public var bytes: Int64
    public var logRecords: Int
    public var evictions: Int
}

/// What a posts refresh changed.
public struct PostsChange: Sendable, Equatable {
    public var fetched = 0
    public var unchanged = 0
    public var removed = 0
}

/// Where and how big the store is allowed to be.
public struct StoreConfiguration: Sendable {
    /// The store directory; created if missing.
    public var directory: String
    /// Cap on the bytes of `objects/`; 0 means no cap. Default 0.
    public var maxBytes: Int64 = 0
    /// Compact automatically once the log holds this many more records than
    /// live state needs. Default 10,000.
    public var compactionSlack: Int = 10_000
    /// Called once, on the writing thread, when writes stop because the log
    /// or lock was removed or replaced (the daemon logs it as an error).
    public var onWritesStopped: (@Sendable (String) -> Void)?

    public init(directory: String, maxBytes: Int64 = 0) {
        self.directory = directory
        self.maxBytes = maxBytes
    }
}

/// The in-memory index: what replaying the log produces.
struct StoreState {
    var posts: [Int64: [UInt8]] = [:]
    var sortedIDs: [Int64] = []
    var rows: [Row] = []
    var objects: [Hash128: ObjectRef] = [:]
    var validators: [Feed: Validators] = [:]
    var postsKnown = false
    var manifestKnown = false
    /// Last use of each object (ms since the epoch), for least-recently-used eviction.
    var lastUse: [Hash128: Int64] = [:]
    /// Objects whose last use changed since the last `access` records were logged.
    var unloggedUse: Set<Hash128> = []
    var bytes: Int64 = 0
    var evictions = 0
    /// Changes whenever a row's URL or the row count changes.
    var manifestGeneration = 0
    /// Feeds whose logged validators held unsafe values (dropped on replay).
    var damagedValidators: Set<Feed> = []

    mutating func apply(_ record: LogRecord) {
        switch record {
        case let .post(id, json):
            posts[id] = json
        case let .postRemoved(id):
            posts[id] = nil
        case let .manifestSize(count):
            manifestGeneration += 1
            if rows.count > count { rows.removeLast(rows.count - count) }
            while rows.count < count { rows.append(Row(url: "", description: nil, object: nil)) }
            manifestKnown = true
        case let .row(i, url, description):
            growRows(to: i + 1)
            if rows[i].url != url { rows[i].object = nil; manifestGeneration += 1 }
            rows[i].url = url
            rows[i].description = description
        case let .rowObject(i, hash, size, type):
            growRows(to: i + 1)
            let ref = ObjectRef(hash: hash, size: size, type: type)
            rows[i].object = ref
            if objects.updateValue(ref, forKey: hash) == nil { bytes += size }
        case let .objectRemoved(hash):
            removeObjects([hash])
        case let .validators(feed, etag, lastModified):
            // Damaged validators (written by 0.1.0 with a trailing CRLF) are
            // dropped, so the next refresh is unconditional and stores clean ones.
            let v = Validators(etag: etag, lastModified: lastModified)
            if v.isDamaged { damagedValidators.insert(feed) } else { damagedValidators.remove(feed) }
            validators[feed] = v.sanitized
            if feed == .posts { postsKnown = true } else { manifestKnown = true }
        case let .access(hash, time):
            if objects[hash] != nil { lastUse[hash] = max(lastUse[hash] ?? 0, time) }
        case .commit:
            break
        }
    }

    /// Applies a transaction. Runs of `objectRemoved` are applied together,
    /// with one pass over the rows: removing many objects (eviction, gc, a
    /// sweep at start) stays linear in the rows.
    mutating func apply(transaction records: [LogRecord]) {
        var removed: Set<Hash128> = []
        for r in records {
            if case let .objectRemoved(hash) = r { removed.insert(hash); continue }
            if !removed.isEmpty { removeObjects(removed); removed = [] }
            apply(r)
        }
        if !removed.isEmpty { removeObjects(removed) }
    }

    /// Forgets objects; every row pointing to one becomes uncached.
    mutating func removeObjects(_ hashes: Set<Hash128>) {
        for hash in hashes {
            if let old = objects.removeValue(forKey: hash) { bytes -= old.size }
            lastUse[hash] = nil
            unloggedUse.remove(hash)
        }
        for i in rows.indices {
            if let h = rows[i].object?.hash, hashes.contains(h) { rows[i].object = nil }
        }
    }

    private mutating func growRows(to n: Int) {
        while rows.count < n { rows.append(Row(url: "", description: nil, object: nil)) }
    }

    mutating func sortPosts() { sortedIDs = posts.keys.sorted() }

    /// Transactions that rebuild exactly this state, for compaction.
    ///
    /// Small transactions rather than one, so that damage in a compacted log
    /// loses only what follows it: posts in chunks, each chunk of rows with
    /// their mappings and use times, and last the feeds' sizes and validators
    /// (a prefix without them leaves the feed unknown, so the next prefetch
    /// refetches it unconditionally).
    func liveTransactions(chunk: Int = 64) -> [[LogRecord]] {
        var out: [[LogRecord]] = []
        var current: [LogRecord] = []
        func flush() { if !current.isEmpty { out.append(current); current = [] } }
        for (n, id) in sortedIDs.enumerated() {
            if let json = posts[id] { current.append(.post(id: id, json: json)) }
            if (n + 1) % chunk == 0 { flush() }
        }
        flush()
        if let v = validators[.posts] { out.append([.validators(feed: .posts, etag: v.etag, lastModified: v.lastModified)]) }
        else if postsKnown { out.append([.validators(feed: .posts, etag: nil, lastModified: nil)]) }
        // One use time per object, after the first row that maps it (several
        // rows may share one object; their use time is the object's).
        var timed = Set<Hash128>()
        for (i, row) in rows.enumerated() {
            current.append(.row(row: i, url: row.url, description: row.description))
            if let o = row.object {
                current.append(.rowObject(row: i, hash: o.hash, size: o.size, type: o.type))
                if let t = lastUse[o.hash], timed.insert(o.hash).inserted { current.append(.access(hash: o.hash, time: t)) }
            }
            if (i + 1) % chunk == 0 { flush() }
        }
        flush()
        if manifestKnown {
            var last: [LogRecord] = [.manifestSize(count: rows.count)]
            if let v = validators[.manifest] { last.append(.validators(feed: .manifest, etag: v.etag, lastModified: v.lastModified)) }
            out.append(last)
        }
        return out
    }
}

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
    private let writer: Locked<WriterState>
    private let lockFD: FileDescriptor
    /// The store directory, open and flocked for as long as the store is.
    private let directoryFD: FileDescriptor
    /// Every path of the store is resolved through this: beneath the store
    /// directory, never through a symbolic link.
    let files: ConfinedDirectory
    /// The log's record count, readable without waiting for a writer's fsync.
    private let logRecords = Locked(0)
    /// Object commits waiting for the log, and who is writing them.
    private let commitGroup = Monitor(CommitGroup())
    /// Objects renamed into objects/ whose log records are not written yet:
    /// gc must not take them for garbage.
    private let pendingObjects = Locked<[Hash128: Int]>([:])
    /// Fan-out directories whose entry in objects/ this process has fsynced.
    private let durableFanouts = Locked<Set<String>>([])

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
        state = Locked(replayed)
        writer = Locked(WriterState(log: log))
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
    private let closed = Locked(false)
    /// Serialises the writers of `posts/` (a refresh, the start-up
    /// reconciliation). Taken before the writer lock, never after it.
    private let postFiles = Locked(())

    /// Why writes stopped, if they did (see `StoreError.writesStopped`).
    public var writesStopped: String? { writer.withLock { $0.stopped } }

    /// Checks that `index.log` and `lock` are still the files this store
    /// opened: not deleted, not replaced by another file, the log not cut
    /// shorter than what was written. Nil when they are.
    private func replacedFiles(_ w: WriterState) -> String? {
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

    private func restorePostFiles(_ ids: [Int64], from posts: [Int64: [UInt8]]) {
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

    // MARK: Objects

    /// A temp file under `tmp/` to stream one download into.
    public func newObjectWriter(maxSize: Int64) throws(StoreError) -> ObjectWriter {
        do throws(SystemError) { return try ObjectWriter(tempPath: "\(tempDirectory)/\(TempName.next(".part"))", maxSize: maxSize, files: files) }
        catch { throw .io(error) }
    }

    /// Makes a finished download durable and points `rows` at it, refusing
    /// bytes that are not an image with `StoreError.notAnImage` naming the
    /// origin's `declaredContentType` (nil: it sent none) and what the bytes
    /// look like. Whether they are an image depends on the bytes alone.
    public func commitObject(_ objectWriter: ObjectWriter, rows: [(row: Int, url: String)],
                             declaredContentType: String?) throws(StoreError) -> ObjectRef {
        try commitObject(objectWriter, rows: rows, declared: ImageType.declaration(declaredContentType))
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

    private func commitObject(_ objectWriter: ObjectWriter, rows: [(row: Int, url: String)], declared: String?) throws(StoreError) -> ObjectRef {
        guard let type = objectWriter.imageType else {
            objectWriter.discard()
            throw .notAnImage(objectWriter.refusalDetail(declared: declared))
        }
        let ref = ObjectRef(hash: objectWriter.hash, size: objectWriter.size, type: type)
        pendingObjects.withLock { $0[ref.hash, default: 0] += 1 }
        defer {
            pendingObjects.withLock { p in
                p[ref.hash, default: 1] -= 1
                if p[ref.hash] == 0 { p[ref.hash] = nil }
            }
        }
        // The file part needs no lock: names are contents, so two commits of
        // the same bytes rename the same bytes to the same name.
        let path = objectPath(ref.hash)
        do throws(StoreError) { try checkWritable() } catch {
            objectWriter.discard()
            throw error
        }
        do throws(SystemError) {
            let existing = try files.status(path)
            // The same bytes are stored already (logged, or placed by a commit
            // still in flight): keep that file, but only once it proves to hold
            // them (`prefetch --force` must repair a copy damaged on disk, not
            // keep it and discard the good download).
            if let existing, existing.size == ref.size, fileHolds(path, ref.hash) {
                objectWriter.discard()
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
            }
        } catch {
            objectWriter.discard()
            throw .io(error)
        }
        try commitGrouped(ref, rows: rows)
        return ref
    }

    /// Group commit: the first caller becomes the leader and logs every
    /// commit queued so far in one transaction (one write, one fsync); the
    /// others wait for its result. Returns once this commit is durable.
    private func commitGrouped(_ ref: ObjectRef, rows: [(row: Int, url: String)]) throws(StoreError) {
        let id = commitGroup.update { g -> UInt64 in
            g.nextID += 1
            g.queue.append(PendingCommit(id: g.nextID, ref: ref, rows: rows))
            return g.nextID
        }
        enum Step { case done(Result<Void, StoreError>), lead([PendingCommit]) }
        while true {
            let step = commitGroup.wait { g -> Step? in
                if let r = g.results.removeValue(forKey: id) { return .done(r) }
                guard !g.leading else { return nil }
                g.leading = true
                let batch = g.queue
                g.queue = []
                g.leaderBatch = batch.count
                return .lead(batch)
            }
            switch step {
            case .done(let result):
                try result.get()
                return
            case .lead(let batch):
                let result = Result { () throws(StoreError) in try writer.withLock { (w) throws(StoreError) in try logCommits(batch, &w) } }
                commitGroup.update { g in
                    for c in batch { g.results[c.id] = result }
                    g.leading = false
                    g.leaderBatch = 0
                    g.transactions += 1
                }
            }
        }
    }

    /// Logs the row mappings of `batch` as one transaction and applies them.
    /// Rows whose manifest URL changed since their download began are left alone.
    private func logCommits(_ batch: [PendingCommit], _ w: inout WriterState) throws(StoreError) {
        let now = Clock.wallMilliseconds()
        let current = state.withLock { $0.rows }
        var records: [LogRecord] = []
        for c in batch {
            let mapped = c.rows.filter { current.indices.contains($0.row) && current[$0.row].url == $0.url }
            for r in mapped { records.append(.rowObject(row: r.row, hash: c.ref.hash, size: c.ref.size, type: c.ref.type)) }
            if !mapped.isEmpty { records.append(.access(hash: c.ref.hash, time: now)) }
        }
        if !records.isEmpty { try append(records, &w) }
        state.withLock { $0.apply(transaction: records) }
        try evictIfNeeded(&w, keep: Set(batch.map(\.ref.hash)))
        try compactIfNeeded(&w)
    }

    /// For tests: the writer lock, to hold the log as a slow disk would.
    var writerForTests: Locked<WriterState> { writer }
    /// For tests: commits waiting for the log (queued or taken by the leader).
    var queuedCommitsForTests: Int { commitGroup.update { $0.queue.count + $0.leaderBatch } }

    /// Log transactions written for object commits so far (group commit makes
    /// this smaller than the number of commits when they overlap).
    public var objectCommitTransactions: Int { commitGroup.update { $0.transactions } }

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

    /// The rows whose image is `hash` (a scan: only on the failure paths).
    func rowsReferencing(_ hash: Hash128) -> [Int] {
        state.withLock { s in s.rows.indices.filter { s.rows[$0].object?.hash == hash } }
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
        guard let fd = try? files.open(objectPath(hash), O_RDONLY) else { return nil }
        defer { fd.close() }
        let size = Int(ref.size)
        let head = header(size)
        var ok = false
        // Header, then the file read straight into the same (uninitialised)
        // buffer; one byte more is asked for, since a file that grew is not
        // the object either.
        let out = [UInt8](unsafeUninitializedCapacity: head.count + size + 1) { buffer, count in
            _ = buffer.initialize(from: head)
            let body = UnsafeMutableRawBufferPointer(start: buffer.baseAddress! + head.count, count: size + 1)
            let n = clinux_pread_nowait(fd.rawValue, body.baseAddress, UInt(body.count), 0)
            // EAGAIN, short (not all cached) or a size change: the slow path decides.
            ok = n == size && Hash128(of: UnsafeRawBufferPointer(rebasing: body[0..<size])) == hash
            count = ok ? head.count + size : 0
        }
        guard ok else { return nil }
        touch(hash)
        return out
    }

    /// Moves an object's file to `quarantine/` and forgets it; returns where it went.
    @discardableResult
    /// A name in quarantine/ no other quarantined file has.
    private func quarantineName(_ hash: Hash128) -> String {
        "\(quarantineDirectory)/\(hash.hex)-\(Clock.wallSeconds())-\(TempName.next(""))"
    }

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

    /// Logs that an object is gone: every row pointing to it becomes uncached.
    public func forgetObject(_ hash: Hash128) throws(StoreError) {
        try writer.withLock { (w) throws(StoreError) in
            guard state.withLock({ $0.objects[hash] != nil }) else { return }
            try append([.objectRemoved(hash: hash)], &w)
            state.withLock { $0.apply(.objectRemoved(hash: hash)) }
        }
    }

    /// The object named `hash`, if the index knows it.
    public func objectRef(_ hash: Hash128) -> ObjectRef? {
        state.withLock { $0.objects[hash] }
    }

    /// Drops every object whose file is missing or has the wrong size (one
    /// `lstat` each; the rows stay known and are fetched again on demand).
    /// Run at start, in the background. Returns how many were dropped.
    @discardableResult
    public func dropMissingObjects() throws(StoreError) -> Int {
        let refs = state.withLock { Array($0.objects.values) }
        let missing = refs.filter { !objectFileLooksRight($0) }.map(\.hash)
        guard !missing.isEmpty else { return 0 }
        return try writer.withLock { (w) throws(StoreError) -> Int in
            let pending = pendingObjects.withLock { Set($0.keys) }
            let gone = missing.filter { h in !pending.contains(h) && state.withLock { $0.objects[h] != nil } }
                .filter { h in state.withLock { $0.objects[h] }.map { !objectFileLooksRight($0) } ?? false }
            guard !gone.isEmpty else { return 0 }
            try append(gone.map { .objectRemoved(hash: $0) }, &w)
            state.withLock { $0.removeObjects(Set(gone)) }
            return gone.count
        }
    }

    /// Every known object, for `verify`.
    public func knownObjects() -> [Hash128] {
        state.withLock { Array($0.objects.keys) }
    }

    private func evictIfNeeded(_ w: inout WriterState, keep: Set<Hash128>) throws(StoreError) {
        let limit = configuration.maxBytes
        guard limit > 0 else { return }
        let pending = pendingObjects.withLock { Set($0.keys) }
        let victims: [Hash128] = state.withLock { s in
            guard s.bytes > limit else { return [] }
            var excess = s.bytes - limit
            var out: [Hash128] = []
            let order = s.objects.values.filter { !keep.contains($0.hash) && !pending.contains($0.hash) }
                .sorted { (s.lastUse[$0.hash] ?? 0, $0.hash) < (s.lastUse[$1.hash] ?? 0, $1.hash) }
            for o in order where excess > 0 { out.append(o.hash); excess -= o.size }
            return out
        }
        guard !victims.isEmpty else { return }
        try append(victims.map { .objectRemoved(hash: $0) }, &w)
        state.withLock { s in
            s.removeObjects(Set(victims))
            s.evictions += victims.count
        }
        for h in victims { _ = try? unlinkObjectFile(h) }
    }

    /// Removes the file of an object the index no longer holds, unless a
    /// commit of the same bytes is in flight. The check and the unlink happen
    /// together under the pending-commit lock, and `commitObject` registers
    /// there before it renames its file into place, so a file being placed
    /// (or deduplicated against) is never removed: a snapshot of the pending
    /// set taken earlier would miss commits that began after it. Returns
    /// false when the file was kept.
    private func unlinkObjectFile(_ hash: Hash128) throws(SystemError) -> Bool {
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

    /// Deletes object files no row references, and forgets such objects.
    public func collectGarbage() throws(StoreError) -> (removed: Int, freedBytes: Int64) {
        try writer.withLock { (w) throws(StoreError) -> (Int, Int64) in try collectGarbageLocked(&w) }
    }

    private func collectGarbageLocked(_ w: inout WriterState) throws(StoreError) -> (Int, Int64) {
        // Memory that no longer matches the log on disk decides nothing.
        try checkWritable(&w)
        let pending = pendingObjects.withLock { Set($0.keys) }
        let (referenced, known) = state.withLock { s in
            (Set(s.rows.compactMap { $0.object?.hash }), Set(s.objects.keys))
        }
        let keep = referenced.union(pending)
        let unreferenced = known.subtracting(keep)
        if !unreferenced.isEmpty {
            try append(unreferenced.sorted().map { .objectRemoved(hash: $0) }, &w)
            state.withLock { $0.removeObjects(unreferenced) }
        }
        var removed = 0
        var freed: Int64 = 0
        do throws(SystemError) {
            for fan in try files.list(objectsDirectory) {
                let dir = "\(objectsDirectory)/\(fan)"
                guard let st = try files.status(dir), st.isDirectory else {
                    try files.unlink(dir); removed += 1; continue
                }
                var changed = false
                for name in try files.list(dir) {
                    let path = "\(dir)/\(name)"
                    guard let h = Hash128(hex: fan + name) else {
                        // Not an object name: nothing of ours, nothing a commit places.
                        freed += (try files.status(path))?.size ?? 0
                        try files.unlink(path)
                        removed += 1
                        changed = true
                        continue
                    }
                    if keep.contains(h) { continue }
                    let size = (try files.status(path))?.size ?? 0
                    // A commit that began after `pending` was read may be placing this file.
                    guard try unlinkObjectFile(h) else { continue }
                    freed += size
                    removed += 1
                    changed = true
                }
                if changed { try files.syncDirectory(dir) }
            }
        } catch { throw .io(error) }
        return (removed, freed)
    }

    /// Rewrites the log with only the records that rebuild the current state.
    public func compact() throws(StoreError) -> (before: Int, after: Int) {
        try writer.withLock { (w) throws(StoreError) -> (Int, Int) in
            try compactLocked(&w)
        }
    }

    private func compactLocked(_ w: inout WriterState) throws(StoreError) -> (Int, Int) {
        // A log replaced under us must not be overwritten by a rewrite either.
        try checkWritable(&w)
        let before = w.log.recordCount
        let transactions = state.withLock { $0.liveTransactions() }
        do throws(SystemError) { try w.log.rewrite(transactions, tempDirectory: tempDirectory) } catch { throw .io(error) }
        let after = w.log.recordCount
        logRecords.withLock { $0 = after }
        return (before, after)
    }

    /// Throws `writesStopped` once the log or lock was found removed,
    /// replaced or changed (checking them now): the start of every write,
    /// so nothing is written to files, the log or the disk after that.
    private func checkWritable(_ w: inout WriterState) throws(StoreError) {
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
    private func checkWritable() throws(StoreError) {
        if let why = stopReason.withLock({ $0 }) { throw .writesStopped(why) }
    }
    /// Why writes stopped, readable without the writer lock.
    private let stopReason = Locked<String?>(nil)

    /// Appends one transaction and publishes the new record count. The log
    /// and lock are checked after the fsync: a transaction that went into a
    /// file that was deleted, replaced or cut meanwhile is not acknowledged,
    /// and no later write is accepted.
    private func append(_ records: [LogRecord], _ w: inout WriterState) throws(StoreError) {
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

    private func compactIfNeeded(_ w: inout WriterState) throws(StoreError) {
        let live = state.withLock { $0.posts.count + $0.rows.count * 2 + $0.objects.count + 4 }
        if w.log.recordCount > 2 * live + configuration.compactionSlack {
            _ = try compactLocked(&w)
            _ = try collectGarbageLocked(&w)
        }
    }
}
