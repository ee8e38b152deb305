#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// What a reconciliation of `posts/` did (`Store.reconcilePostFiles`).
public struct PostFilesReport: Sendable, Equatable {
    /// Files rewritten (their bytes differed), written (missing) or removed
    /// (of posts the index does not hold).
    public var fixed = 0
    /// The posts' files checked or written so far, of `total` (the posts
    /// that have a file).
    public var checked = 0
    public var total = 0
    /// True when `Store.stopPasses` cut the pass short: nothing is recorded
    /// as matching, so the next start checks every file again.
    public var stopped = false
    /// Why it ran (`Store.postFilesCheck`); nil when it did not: `posts/`
    /// and the log were as the last clean stop left them.
    public var reason: String?

    public init(fixed: Int = 0, checked: Int = 0, total: Int = 0, stopped: Bool = false, reason: String? = nil) {
        self.fixed = fixed
        self.checked = checked
        self.total = total
        self.stopped = stopped
        self.reason = reason
    }
}

/// The reconciliation of `posts/` with the log, the record of a clean stop
/// that lets the next start skip it (`posts.state`), and the stop flag
/// every long pass of the store looks at.
extension Store {
    /// Asks every long pass to return early (shutdown): the reconciliation
    /// of `posts/`, the sweep of missing objects, compaction, gc, eviction's
    /// removals, and any hash made with `stoppable`. Each leaves the store as
    /// valid as before it began; nothing that was acknowledged is undone.
    public func stopPasses() { stop.raise() }

    /// True once `stopPasses` was called.
    public var isStopping: Bool { stop.isRaised }

    /// The flag `stopPasses` raises, for work outside the store that
    /// answers to it too (a feed page's parse: `StopFlag.current`).
    public var stopFlag: StopFlag { stop }

    /// The start's reconciliation (`CacheService.start`): none when the
    /// store opened with `posts.state` naming the log and `posts/` as they
    /// are (`postFilesCheck` nil: the report's `reason` is nil), else a
    /// whole pass (`reconcilePostFiles`).
    public func reconcilePostFilesAtStart() -> PostFilesReport {
        guard let reason = postFilesCheck else {
            return PostFilesReport(total: state.withLock { $0.posts.count })
        }
        return reconcilePostFiles(reason: reason)
    }

    /// Brings `posts/` in line with the index: rewrites files whose bytes
    /// differ (a crash between writing a file and its log record), writes
    /// missing ones and removes files of posts the index does not hold.
    /// Only regular files with one of the store's names
    /// (`PostFileNames.isStoreName`) are the store's: anything else is left
    /// alone and noted (`ignored`). A file that could not be fixed (a failed
    /// write or unlink) is not counted but reported (`onWarning`, one line),
    /// and tried again at the next start.
    ///
    /// `posts/` is listed once. The files of posts are then compared with
    /// the log's bytes by `postReadLanes` threads (a start after a reboot
    /// reads them from the disk, where one read at a time waits on each),
    /// each file opened by its name in the open directory (`openEntry`, no
    /// path walked) and compared as it is read, into one buffer per thread;
    /// those that differ are written again afterwards, one by one. The stop
    /// flag (`stopPasses`) is looked at before each file: a pass cut short
    /// has fixed what it reached, and the rest is left to the next start's
    /// pass, since only a pass that ends with every file matching lets a
    /// clean stop be recorded (`postFilesMatch`).
    @discardableResult
    public func reconcilePostFiles(reason: String? = nil) -> PostFilesReport {
        holdingDirectory { postFiles.withLock { _ in
            let posts = state.withLock { $0.posts }
            let hashedOwners = PostFileNames.owners(posts.keys)
            // Each post's file name and id (its bytes are read from the table
            // when compared); a name met in the listing is taken out, so what
            // is left at the end are the missing files.
            var expected: [String: PostID] = Dictionary(minimumCapacity: posts.count)
            for id in posts.keys {
                let name = PostFileNames.name(of: id)
                if let owner = hashedOwners[name], owner != id { warnWithoutFile(id, name, owner); continue }
                expected[name] = id
            }
            var report = PostFilesReport(total: expected.count, reason: reason)
            var failures = PostFileFailures()
            var entries: [ConfinedDirectory.Entry] = []
            var directory: FileDescriptor?
            // Unlisted, every post's file is written again below: slower, not wrong.
            failures.attempt { () throws(SystemError) in
                entries = try files.list(postsDirectory)
                directory = try files.open(postsDirectory, [.readOnly, .directory])
            }
            defer { directory?.close() }
            func write(_ name: String, _ id: PostID) -> Bool {
                failures.attempt { () throws(SystemError) in
                    try files.writeDurably(posts[id] ?? [], to: postPath(name), tempDirectory: tempDirectory, syncDirectory: false)
                }
            }
            // The listing sorted out: foreign entries noted, files of no post removed, the rest to compare.
            var present: [(name: String, id: PostID)] = []
            present.reserveCapacity(min(entries.count, expected.count))
            for entry in entries {
                if stop.isRaised { report.stopped = true; break }
                // Taken out whatever it is: a post's name held by a link or a directory is not replaced either.
                let id = expected.removeValue(forKey: entry.name)
                guard entry.kind == .regular, id != nil || PostFileNames.isStoreName(entry.name) else {
                    ignored.note(postPath(entry.name), entry.kind)
                    continue
                }
                guard let id else {
                    if failures.attempt({ () throws(SystemError) in try files.unlink(postPath(entry.name)) }) { report.fixed += 1 }
                    continue
                }
                present.append((entry.name, id))
            }
            entries = []
            let compared = report.stopped ? (differing: [], compared: 0, stopped: true) : compare(present, of: posts, in: directory)
            report.checked += compared.compared
            report.stopped = report.stopped || compared.stopped
            // A file that cannot be read is one to write again, as one that differs.
            for i in compared.differing where !report.stopped {
                if stop.isRaised { report.stopped = true; break }
                if write(present[i].name, present[i].id) { report.fixed += 1 }
            }
            for (name, id) in expected where !report.stopped {
                if stop.isRaised { report.stopped = true; break }
                report.checked += 1
                if write(name, id) { report.fixed += 1 }
            }
            if report.fixed > 0 { failures.attempt { () throws(SystemError) in try files.syncDirectory(postsDirectory) } }
            warn(failures, "make every post file match the index", then: "what failed is tried again at the next start")
            if !report.stopped && failures.count == 0 { postFilesMatch.withLock { $0 = true } }
            return report
        } }
    }

    /// Threads comparing post files at once: reads from a cold page cache
    /// overlap. Measured at 1,000,000 posts (release build, ext4 on a
    /// virtio disk, 2 cores), the files' pages evicted: one thread 66.6 s,
    /// four 28.9 s, eight 20.7 s; all in the page cache: 12.8, 5.7 and 4.5 s.
    static let postReadLanes = 8

    /// Compares each of `files` (names in `directory`, and the post of
    /// `posts` whose bytes each must hold) on `postReadLanes` threads, looking at the stop flag
    /// before each: the indices of those that differ (or cannot be read),
    /// in order, how many were compared, and whether the flag cut it short.
    private func compare(_ files: [(name: String, id: PostID)], of posts: PostTable, in directory: FileDescriptor?) -> (differing: [Int], compared: Int, stopped: Bool) {
        let lanes = max(1, min(Self.postReadLanes, files.count))
        let outcome = Locked<(differing: [Int], compared: Int, stopped: Bool)>(([], 0, false))
        let stop = self.stop
        Threads.parallel(count: lanes, threads: lanes) { lane in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.postReadPiece, alignment: 64)
            defer { buffer.deallocate() }
            var differing: [Int] = []
            var compared = 0, stopped = false
            for i in stride(from: lane, to: files.count, by: lanes) {
                if stop.isRaised { stopped = true; break }
                if !Self.file(files[i].name, in: directory, holds: posts[files[i].id] ?? [], buffer) { differing.append(i) }
                compared += 1
            }
            outcome.withLock { o in
                o.differing += differing
                o.compared += compared
                o.stopped = o.stopped || stopped
            }
        }
        var result = outcome.withLock { $0 }
        result.differing.sort()
        return result
    }

    /// Post files are read this much at a time: most posts fit whole.
    static let postReadPiece = 64 << 10

    /// True when `name` in the open `directory` is a file holding exactly
    /// `json`; false when it differs or cannot be opened or read.
    private static func file(_ name: String, in directory: FileDescriptor?, holds json: [UInt8], _ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        guard let directory, let fd = try? directory.openEntry(name) else { return false }
        defer { fd.close() }
        return (try? fd.holds(json, buffer: buffer)) ?? false
    }

    // MARK: posts.state

    /// Reads and removes `posts.state` at open (before anything is written):
    /// nil when it names `index.log` and `posts/` exactly as they are, so
    /// that every post file is known to match the log; otherwise why the
    /// start's reconciliation must run. The file is removed (and the store
    /// directory synced) whatever it held, so that it stands for one clean
    /// stop and the open that follows it: a later crash leaves none.
    static func takePostsState(_ files: ConfinedDirectory, directory: String, warn: (@Sendable (String) -> Void)?) -> String? {
        let name = StoreNames.postsStateFile
        let path = "\(directory)/\(name)"
        let status: FileStatus?
        do throws(SystemError) { status = try files.status(name) } catch { return "\(path) could not be examined (\(error))" }
        guard let status else {
            return "there is no \(name): a new store, or the last stop was not clean (a crash, a kill, work abandoned at the stop) "
                + "or stopped a refresh or a check of post files part way"
        }
        // Never opened unless regular (a FIFO would block), never removed: not the store's.
        guard status.isRegular else { return "\(path) is \(status.kind), not a file cached made; it is left as it is" }
        var found: String?
        do throws(SystemError) {
            let bytes = try files.read(name, limit: PostsState.maxBytes + 1)
            let log = try files.identity(StoreNames.logFile), posts = try files.identity("posts")
            do throws(PostsStateDamage) {
                let recorded = try PostsState(decoding: bytes)
                found = log != recorded.log ? "index.log changed after the daemon stopped cleanly"
                    : posts != recorded.posts ? "posts/ changed after the daemon stopped cleanly" : nil
            } catch {
                found = "\(path) is damaged (\(error))"
            }
        } catch {
            found = "\(path) could not be read (\(error))"
        }
        do throws(SystemError) {
            try files.unlink(name)
            try files.descriptor.sync()
        } catch {
            warn?("could not remove \(path) (\(error)); every post file is checked against the index")
            return "\(path) could not be removed"
        }
        return found
    }

    /// Writes `posts.state` as the store closes after a clean stop: only
    /// when every post file is known to match the log (`postFilesMatch`:
    /// the start's pass ended, or was not needed, and no post file failed
    /// since) and writes did not stop. Taken under `postFiles` and the
    /// writer lock, after the last append. A failure is reported
    /// (`onWarning`): the next start then checks every file, as after a crash.
    func recordCleanStop() {
        postFiles.withLock { _ in
            writer.withLock { w in
                guard w.stopped == nil, replacedFiles(w) == nil, postFilesMatch.withLock({ $0 }) else { return }
                do throws(SystemError) {
                    // Only a file of its own is replaced: a link or a directory by that name is left as it is.
                    if let found = try files.status(StoreNames.postsStateFile), !found.isRegular {
                        throw SystemError("rename", "\(directory)/\(StoreNames.postsStateFile) (\(found.kind), not a file cached made)", errno: EEXIST)
                    }
                    guard let log = try files.identity(StoreNames.logFile), let posts = try files.identity("posts") else { return }
                    try files.writeDurably(PostsState(log: log, posts: posts).encoded, to: "\(directory)/\(StoreNames.postsStateFile)",
                                           tempDirectory: tempDirectory, mode: 0o600)
                } catch {
                    configuration.onWarning?("could not record the clean stop in \(directory)/\(StoreNames.postsStateFile) (\(error)); "
                                             + "the next start checks every post file against the index")
                }
            }
        }
    }
}
