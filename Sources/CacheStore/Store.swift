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
    let commitGroup = GroupCommit()
    /// Objects renamed into objects/ whose log records are not written yet:
    /// gc must not take them for garbage.
    let pendingObjects = Locked<[Hash128: Int]>([:])
    /// Fan-out directories whose entry in objects/ this process has fsynced.
    let durableFanouts = Locked<Set<String>>([])

    /// How reads are verified here (`verify-reads`, resolved at open).
    public let readVerification: ReadVerification
    /// Files hashed and found to hold their object, for `on-change`.
    let trusted = Locked(TrustedFiles())
    /// Object read errors met (`readErrors`).
    let readErrorCount = Locked(0)
    /// Small objects' verified bytes, kept in memory (`SmallObjects`).
    let smallObjects = Locked(SmallObjects())
    /// Objects `openVerified` hashed whole (not trusted): for tests.
    let wholeHashes = Locked(0)

    /// Entries of the store it did not make, reported once each when met.
    let ignored: IgnoredEntries

    /// What recovery cut from the log at open, if anything.
    public let recovery: LogRecovery?

    struct WriterState: Sendable {
        var log: IndexLog
        /// The log's length after its last rewrite (or at open): compaction
        /// also runs once the log is twice that plus `compactionSlackBytes`.
        var compactedLength: Int64 = 0
        /// Set once the log or lock was found removed or replaced: every later write fails.
        var stopped: String?
    }

    var postsDirectory: String { directory + "/posts" }
    var objectsDirectory: String { directory + "/objects" }
    public var tempDirectory: String { directory + "/tmp" }
    var quarantineDirectory: String { directory + "/quarantine" }

    /// How long the opening took: the log's replay (reading, checking and
    /// applying every record) and the posts' order derived after it.
    public struct OpenTimes: Sendable {
        public var replay: Duration
        /// The posts' titles located, after the replay (`PostTable.locateTitles`).
        public var titles: Duration
        public var order: Duration
    }

    /// Threads that locate the posts' titles after a replay: the cores this
    /// process may run on (its affinity mask, as `nproc` counts them), at most 4.
    static var titleThreads: Int { max(1, min(4, Threads.usableCores)) }

    /// How long this store's opening took (logged at start).
    public let openTimes: OpenTimes

    /// Opens the store: takes the lock, refuses a directory that holds files
    /// but no store (`StoreError.notAStore`), replays the log (cutting a
    /// damaged tail aside), creates the layout, empties `tmp/` of temp files.
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
        try Store.lockDirectory(files, directory: directory)
        // Under the directory's lock (a daemon creating this store holds it)
        // and before anything is created: a directory that is not a store is
        // refused as it is.
        try Store.refuseUnlessStore(files, directory: directory)
        lockFD = try Store.lockFile(files, directory: directory)
        ignored = IgnoredEntries(report: configuration.onIgnoredEntry)

        var replayed = StoreState()
        replayed.posts.deferTitles()
        let replayStart = Clock.monotonicNanoseconds()
        let prefaulter = Store.prefaulter(files)
        let log: IndexLog
        do throws(IndexLogError) {
            // The log first: a log written by a newer cached is refused
            // before anything else in the store is created or emptied.
            defer {
                prefaulter?.stop()
                if prefaulter != nil { replayed.discardUnusedPages() }
            }
            let directory = files
            log = try Prefaulter.$current.withValue(prefaulter) {
                Result { () throws(IndexLogError) in
                    try IndexLog(directory: directory, name: StoreNames.logFile) { transaction in
                        replayed.apply(transaction: transaction)
                    }
                }
            }.get()
        } catch {
            lockFD.close()
            directoryFD.close()
            throw StoreError(opening: error)
        }
        do throws(SystemError) { try Store.prepareLayout(files, ignored) } catch {
            log.close()
            lockFD.close()
            directoryFD.close()
            // The open fails, so nobody logs the recovery: the error says it.
            guard let r = log.recovery else { throw .io(error) }
            throw .io(SystemError(error.call, error.subject + " (index.log had been cut first: \(r.problem); the cut bytes are in \(r.savedTo))", errno: error.errno))
        }
        let locating = Clock.monotonicNanoseconds()
        replayed.posts.locateTitles(threads: Store.titleThreads)
        let ordering = Clock.monotonicNanoseconds()
        replayed.orderPosts()
        openTimes = OpenTimes(replay: Clock.elapsed(since: replayStart) - Clock.elapsed(since: locating),
                              titles: Clock.elapsed(since: locating) - Clock.elapsed(since: ordering), order: Clock.elapsed(since: ordering))
        // Before anything is written to the log or to posts/.
        postFilesCheck = Store.takePostsState(files, directory: directory, warn: configuration.onWarning)
        postFilesMatch = Locked(postFilesCheck == nil)
        readVerification = ReadVerification.resolve(configuration.verifyReads, directory: files.descriptor,
                                                    realPath: directory + "/objects")
        recovery = log.recovery
        state = Locked(replayed, rank: .storeState)
        writer = Locked(WriterState(log: log, compactedLength: log.length), rank: .storeWriter)
        logRecords.withLock { $0 = log.recordCount }
    }

    /// Tries, 10 ms apart, to take a lock this process itself seems to hold.
    static let ownLockRetries = 200

    /// Takes the lock on the store directory itself, which cannot be deleted
    /// or replaced while it holds the store; on failure closes the directory.
    private static func lockDirectory(_ files: ConfinedDirectory, directory: String) throws(StoreError) {
        let directoryFD = files.descriptor
        var free: Bool
        do throws(SystemError) { free = try directoryFD.tryLockExclusive() } catch { directoryFD.close(); throw .io(error) }
        // Held by this very process: a store it just closed, whose
        // descriptor a child being spawned this instant still shares until
        // its exec closes it. That passes within moments; another holder does not.
        var tries = 0
        while !free && tries < Self.ownLockRetries && holderPID(lockText(files)) == getpid() {
            usleep(10_000)
            tries += 1
            do throws(SystemError) { free = try directoryFD.tryLockExclusive() } catch { directoryFD.close(); throw .io(error) }
        }
        guard free else {
            let text = lockText(files)
            directoryFD.close()
            throw .locked(directory: directory, holderPID: holderPID(text))
        }
    }

    /// What `lock` holds (the holder's pid), or nil when it cannot be read:
    /// the pid only names the holder, and an unknown one is `another process`.
    private static func lockText(_ files: ConfinedDirectory) -> [UInt8]? {
        try? files.read(StoreNames.lockFile, limit: maxPIDText)
    }

    /// The pid that `text` (read from `lock`) gives, if any.
    private static func holderPID(_ text: [UInt8]?) -> Int32? {
        Int32(String(decoding: text ?? [], as: UTF8.self).filter { $0.isNumber })
    }

    /// Throws `notAStore` (closing the directory) when the directory holds
    /// files but no store (`StoreIdentity`).
    private static func refuseUnlessStore(_ files: ConfinedDirectory, directory: String) throws(StoreError) {
        let finding: StoreIdentity.Finding?
        do throws(SystemError) { finding = try StoreIdentity.judge(files) } catch { files.descriptor.close(); throw .io(error) }
        guard let finding else { return }
        files.descriptor.close()
        throw .notAStore(directory: directory, found: finding.summary, log: finding.log)
    }

    /// Opens (creating) `lock`, flocks it and writes this process's pid in
    /// it: it names the holder, and keeps 0.1.0 daemons, which lock that
    /// file, out. On failure closes the directory.
    private static func lockFile(_ files: ConfinedDirectory, directory: String) throws(StoreError) -> FileDescriptor {
        let directoryFD = files.descriptor
        let lockFD: FileDescriptor
        do throws(SystemError) { lockFD = try files.open(StoreNames.lockFile, [.readWrite, .create], mode: 0o600) }
        catch { directoryFD.close(); throw .io(error) }
        var acquired = false
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
            // Unreadable, the holder is `another process`, as above.
            let text = try? lockFD.readToEnd(limit: maxPIDText)
            lockFD.close()
            directoryFD.close()
            throw .locked(directory: directory, holderPID: holderPID(text))
        }
        return lockFD
    }

    /// A pid and its newline fit in 32 bytes with room to spare.
    static let maxPIDText = 32

    /// Creates the subdirectories (durably, when one was missing) and empties
    /// `tmp/` of the store's temp files; anything else there is left and noted.
    private static func prepareLayout(_ files: ConfinedDirectory, _ ignored: IgnoredEntries) throws(SystemError) {
        var created = false
        for sub in StoreNames.subdirectories {
            if try files.makeDirectory(sub, mode: 0o700) { created = true }
        }
        // A subdirectory made now (a new store, or one someone deleted)
        // must be durable before anything is committed into it.
        if created { try files.descriptor.sync() }
        for entry in try files.list("tmp") {
            let path = "tmp/" + entry.name
            guard entry.kind == .regular, StoreNames.isTempName(entry.name) else {
                ignored.note(files.path + "/" + path, entry.kind)
                continue
            }
            try files.unlink(path)
        }
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
            let open: FileStatus, found: FileStatus?
            do throws(SystemError) {
                open = try fd.status()
                found = try files.status(name)
            } catch {
                return "\(directory)/\(name) cannot be examined (\(error))"
            }
            guard let named = found else {
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
        return check(StoreNames.logFile, w.log.descriptor, length: w.log.length) ?? check(StoreNames.lockFile, lockFD, length: nil)
    }

    // MARK: Reads

    /// The stored JSON of post `id`.
    public func post(id: PostID) -> [UInt8]? {
        state.withLock { $0.posts[id] }
    }

    /// Post `id`'s bytes lent to `body` without a copy (`get_post`'s answer
    /// is built from them), or nil when no such post. `body` runs under the
    /// store's lock: it copies the bytes out and does nothing else. Not
    /// generic, for the same reason as `CacheService.withPost`.
    public func withPost(id: PostID, _ body: (UnsafeRawBufferPointer) -> [UInt8]) -> [UInt8]? {
        state.withLock { $0.posts.withBytes(of: id, body) }
    }

    /// True once a posts refresh was stored.
    public var postsKnown: Bool { state.withLock { $0.postsKnown } }

    /// The posts feed's pages as stored; empty while the feed is unknown.
    /// A feed stored with its validators alone (a version-1 store, or one
    /// page of unknown URL) is `[FeedPage(url: "", validators: v, next: nil,
    /// count: <every post>)]`.
    public var postPages: [FeedPage] { state.withLock { $0.pages(of: .posts) } }

    /// The manifest's pages as stored, by the rules of `postPages` (its
    /// count is the number of rows).
    public var manifestPages: [FeedPage] { state.withLock { $0.pages(of: .manifest) } }

    /// The format version `index.log`'s header names now: 1 until the
    /// store first writes what version 1 cannot hold.
    public var logFormatVersion: UInt8 { writer.withLock { $0.log.version } }

    /// Changes whenever a row's URL or the number of rows changes, so that
    /// derived tables (resolved URLs) know when to rebuild.
    public var manifestGeneration: Int { state.withLock { $0.manifestGeneration } }
    /// Changes whenever a post is stored or removed or the posts' order may
    /// change, so that derived tables (the titles searches read) know when
    /// to rebuild.
    public var postsGeneration: Int { state.withLock { $0.postsGeneration } }
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

    /// Feeds whose logged validators held a control character or stray
    /// whitespace and were dropped when the log was replayed (the next
    /// refresh of each is unconditional and stores clean ones).
    public var damagedValidators: Set<Feed> {
        state.withLock { $0.damagedValidators }
    }

    /// The absolute path of an object's file: `objects/ab/<30 hex>`.
    public func objectPath(_ hash: Hash128) -> String {
        directory + "/" + Self.objectRelativePath(hash)
    }

    /// `objects/ab/cdef...` (docs/storage-format.md, "Object names"), built
    /// in one buffer: every read of an object names it.
    static func objectRelativePath(_ hash: Hash128) -> String {
        String(unsafeUninitializedCapacity: 41) { out in
            let prefix = "objects/".utf8
            var i = 0
            for b in prefix { out[i] = b; i += 1 }
            let digits = ASCII.lowercaseHexDigits
            for n in 0..<32 {
                let word = n < 16 ? hash.high : hash.low
                let shift = UInt64(15 - n % 16) * 4
                out[i] = digits[Int((word >> shift) & 0xf)]
                i += 1
                if n == 1 { out[i] = UInt8(ascii: "/"); i += 1 }
            }
            return i
        }
    }

    /// Notes that an object was served (for eviction order). The time reaches
    /// the log with the next `logAccessTimes()`.
    public func touch(_ hash: Hash128) {
        let now = Clock.wallMilliseconds()
        state.withLock { s in
            if s.objects.setLastUse(hash, now) { s.unloggedUse.insert(hash) }
        }
    }

    /// Appends the use times noted since the last call, so that eviction order
    /// survives a restart (approximately: uses since the last call are lost
    /// in a crash). The daemon calls it every minute and at shutdown.
    public func logAccessTimes() throws(StoreError) {
        try writer.withLock { (w) throws(StoreError) in
            let records: [LogRecord] = state.withLock { s in
                let out = s.unloggedUse.sorted().compactMap { h in s.objects.lastUse(h).map { LogRecord.access(hash: h, time: $0) } }
                s.unloggedUse.removeAll()
                return out
            }
            if !records.isEmpty { try append(records, &w) }
        }
    }

    /// True when the object's file is a regular file of its recorded size:
    /// the hit test (its fan-out directory opened without links, one
    /// `fstatat`; no writes: safe on the event loop).
    public func objectFileLooksRight(_ ref: ObjectRef) -> Bool {
        // One that cannot be examined is not served either: as missing.
        guard let st = try? files.status(objectPath(ref.hash)) else { return false }
        return st.isRegular && st.size == ref.size
    }

    /// Like `objectFileLooksRight`, but a missing or truncated file is also
    /// dropped from the index (its rows become uncached). Writes the log.
    public func objectIsPresent(_ ref: ObjectRef) -> Bool {
        if objectFileLooksRight(ref) { return true }
        do throws(StoreError) { try forgetObject(ref.hash) } catch {
            configuration.onWarning?("could not forget object \(ref.hash), whose file is missing or of the wrong size (\(error)); the index still names it")
        }
        return false
    }

    public func stats() -> StoreStats {
        let records = logRecords.withLock { $0 }
        return state.withLock { s in
            StoreStats(posts: s.posts.count, rows: s.rows.count,
                       rowsCached: s.rows.reduce(0) { $0 + ($1.object == nil ? 0 : 1) },
                       objects: s.objects.count, bytes: s.bytes, logRecords: records, evictions: s.evictions,
                       variants: s.variants.count)
        }
    }

    /// Raised by `stopPasses` (shutdown): long passes return early.
    let stop = StopFlag()
    /// Why the start's reconciliation of `posts/` must run, found at open
    /// (`takePostsState`); nil when `posts/` is as a clean stop left it.
    public let postFilesCheck: String?
    /// True while every post file is known to match the log: from an open
    /// after a clean stop, or a reconciliation that ended with nothing
    /// failed, until a post file fails to be written, put back or removed.
    let postFilesMatch: Locked<Bool>

    /// Why writes stopped, readable without the writer lock.
    let stopReason = Locked<String?>(nil)
    /// Writers of files outside the writer lock running now (`writingFiles`),
    /// and whether `close` left the directory open for them to close.
    let fileWriters = Locked((running: 0, directoryLeftOpen: false))
    /// Posts reported as having no file (`warnWithoutFile`), each once.
    let postsWithoutFile = Locked<Set<PostID>>([])
}
