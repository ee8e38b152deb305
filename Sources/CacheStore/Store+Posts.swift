#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// The posts feed's writes: a refresh (post files, then one transaction).
/// The reconciliation of `posts/` with the log is `Store+PostFiles`.
extension Store {
    /// Makes the stored posts equal to `posts` (id and exact JSON bytes, in
    /// feed order, already deduplicated) and the feed's pages to `pages`
    /// (whose counts add up to `posts.count` less `history`, the posts
    /// kept after the feed's own by `posts-keep`), in one transaction:
    /// changed posts, tombstones, the order when the replay would not derive
    /// it, the pages when they changed. Writes nothing when nothing changed
    /// and the feed is known. Throws `invalidFeed` for an id or pages that
    /// break those rules, and `postsBelowHeadroom` when the files to write
    /// would leave the file system less than `headroom` free
    /// (`posts-min-free-space`; 0: unchecked), before anything is written.
    /// `posts` is taken: a post's bytes that nothing else holds are freed as
    /// the post table copies them in, so a refresh of a million posts does
    /// not hold them twice at its end.
    public func replacePosts(_ posts: consuming [(id: PostID, json: [UInt8])], pages unchecked: [FeedPage], history: Int = 0,
                             headroom: Int64 = 0) throws(StoreError) -> PostsChange {
        try Self.check(posts.lazy.map(\.id), items: posts.count - history, pages: unchecked, feed: "posts")
        let pages = unchecked.map(\.sanitized)
        var given: [(id: PostID, json: [UInt8])]? = consume posts
        // The post files are written under `postFiles`, not the writer lock:
        // a large refresh (one fsync per changed post) must not hold up object
        // commits, evictions or gc. Only the log transaction takes the writer
        // lock. Posts change nowhere else, so the snapshot below stays current.
        return try postFiles.withLock { (_) throws(StoreError) -> PostsChange in try writingFiles { () throws(StoreError) -> PostsChange in
            // The snapshot goes before the transaction changes the posts: kept, it
            // would make that change copy the table (copies share storage until one changes).
            var (plan, generation) = { () -> (PostsPlan, Int) in
                let (stored, generation) = state.withLock { s in
                    (PostsPlan.Stored(posts: s.posts, recordedOrder: s.recordedOrder, pages: s.pages[.posts],
                                      damaged: s.damagedValidators.contains(.posts)), s.postsGeneration)
                }
                return (PostsPlan(from: stored, to: given ?? [], pages: pages), generation)
            }()
            // From here the plan's records alone hold the posts' bytes.
            given = nil
            guard !plan.records.isEmpty else { return plan.change }
            try checkPostsHeadroom(headroom, files: plan.writes)
            for (id, name, owner) in plan.withoutFile { warnWithoutFile(id, name, owner) }
            var written: [String] = []
            do throws(SystemError) {
                try writePostFiles(plan.writes, &written)
                plan.writes = []
                if !written.isEmpty { try files.syncDirectory(postsDirectory) }
            } catch {
                if error.errno == ECANCELED, stop.isRaised {
                    // Stopping: not put back now (as many writes again). Nothing
                    // was logged, and with no clean stop recorded the next
                    // start's reconciliation puts the files back.
                    if !written.isEmpty { postFilesMatch.withLock { $0 = false } }
                    throw .stopped("a posts refresh stopped after writing \(NumberText.grouped(written.count)) of "
                                   + "\(NumberText.grouped(plan.writes.count)) post files; nothing was logged, the posts stay as they were, "
                                   + "and the next start puts those files back")
                }
                // The log still describes the old posts: put their files back.
                restorePostFiles(written, plan.previous)
                throw .io(error)
            }
            do throws(StoreError) {
                try writer.withLock { (w) throws(StoreError) in
                    try append(plan.records, &w)
                    state.withLock { s in
                        // The posts' freed copies are small blocks of malloc's
                        // heap, which it keeps while the table's arena takes new
                        // pages from the kernel: given back a chunk's worth at a
                        // time, or the table would be resident twice at the end
                        // of a large refresh (VmHWM 827 MiB, against 514 before
                        // the apply, at 1,000,000 posts; 677 with this; issue
                        // 34). Under the state lock: the 16 trims of that
                        // refresh took 19 ms together.
                        s.apply(consuming: &plan.records) { Memory.returnFreePages() }
                        s.orderPosts()
                    }
                    try compactIfNeeded(&w)
                }
            } catch {
                if state.withLock({ $0.postsGeneration == generation }) { restorePostFiles(written, plan.previous) }
                throw error
            }
            // The transaction is logged: a file left behind is only a stale
            // copy, removed by the next start's reconciliation. Said, not thrown.
            var failures = PostFileFailures()
            for name in plan.removals { failures.attempt { () throws(SystemError) in try files.unlink(postPath(name)) } }
            if !plan.removals.isEmpty { failures.attempt { () throws(SystemError) in try files.syncDirectory(postsDirectory) } }
            warn(failures, "remove the files of removed posts", then: "they are removed at the next start")
            return plan.change
        } }
    }

    /// The path of the post file named `name` (`PostFileNames.name(of:)`).
    func postPath(_ name: String) -> String { "\(postsDirectory)/\(name)" }

    /// The path of post `id`'s file.
    func postPath(of id: PostID) -> String { postPath(PostFileNames.name(of: id)) }

    /// Threads writing post files at once. Each writes, fsyncs and renames
    /// its share of the files one after the other; concurrent fsyncs on one
    /// file system share journal commits. On ext4 here: about 1,400 files a
    /// second one by one, 7,000 with 16 threads (more did not help).
    static let postFileWriters = 16

    /// Writes every file durably to `posts/<name>` (temp file, fsync,
    /// rename; the caller fsyncs the directory), noting each name renamed
    /// into place in `written`, also when one fails: then the others stop,
    /// and the first failure is thrown once every writer has returned.
    /// Once the stop flag is raised (`stopPasses`), no further file is
    /// begun, and `ECANCELED` is thrown.
    func writePostFiles(_ files: [(name: String, bytes: [UInt8])], _ written: inout [String]) throws(SystemError) {
        let outcome = Locked<(done: [Bool], failure: SystemError?)>((Array(repeating: false, count: files.count), nil))
        Threads.parallel(count: files.count, threads: Store.postFileWriters) { [self] i in
            guard outcome.withLock({ $0.failure == nil }) else { return }
            if stop.isRaised {
                outcome.withLock { if $0.failure == nil { $0.failure = SystemError("write", postsDirectory, errno: ECANCELED) } }
                return
            }
            do throws(SystemError) {
                try self.files.writeDurably(files[i].bytes, to: postPath(files[i].name), tempDirectory: tempDirectory, syncDirectory: false)
                outcome.withLock { $0.done[i] = true }
            } catch {
                outcome.withLock { if $0.failure == nil { $0.failure = error } }
            }
        }
        let (done, failure) = outcome.withLock { $0 }
        for (i, file) in files.enumerated() where done[i] { written.append(file.name) }
        if let failure { throw failure }
    }

    /// Puts the files named `names` back to what `previous` says they held
    /// (the bytes of that post in the index, which the refresh did not
    /// change; removing those that did not exist). What cannot be put back is
    /// reported (`onWarning`): the refresh's own error is the one thrown,
    /// and the next start's reconciliation makes the files match the log.
    func restorePostFiles(_ names: [String], _ previous: [String: PostID]) {
        var failures = PostFileFailures()
        for name in names {
            failures.attempt { () throws(SystemError) in
                if let owner = previous[name], let old = state.withLock({ $0.posts[owner] }) {
                    try files.writeDurably(old, to: postPath(name), tempDirectory: tempDirectory)
                } else {
                    try files.unlink(postPath(name))
                }
            }
        }
        warn(failures, "put back the post files of a refresh that failed", then: "they are made to match the index at the next start")
    }

    /// Failed calls on post files that the caller does not throw: how many
    /// and the first, for one warning line.
    struct PostFileFailures {
        private(set) var count = 0
        private(set) var first: SystemError?

        /// Runs `body`; true when it succeeded, else its error is noted.
        @discardableResult
        mutating func attempt(_ body: () throws(SystemError) -> Void) -> Bool {
            do throws(SystemError) { try body() } catch {
                count += 1
                if first == nil { first = error }
                return false
            }
            return true
        }
    }

    /// One warning (`onWarning`) for every call in `failures`: could not
    /// `what`, how many times and the first error, and what `then` follows.
    func warn(_ failures: PostFileFailures, _ what: String, then: String) {
        guard let first = failures.first else { return }
        // Some file may differ from the log now: no clean stop is recorded until a pass fixes it.
        postFilesMatch.withLock { $0 = false }
        let times = failures.count == 1 ? "" : " (\(failures.count) calls failed, the first shown)"
        configuration.onWarning?("could not \(what) in \(postsDirectory)\(times): \(first); \(then)")
    }

    /// Logs once per post and process that post `id` has no file: its hashed
    /// name is `owner`'s (an XXH3-128 collision of two ids).
    func warnWithoutFile(_ id: PostID, _ name: String, _ owner: PostID) {
        let first = postsWithoutFile.withLock { seen in
            seen.count < IgnoredEntries.limit && seen.insert(id).inserted
        }
        guard first else { return }
        configuration.onWarning?("post \(StoreNames.printable(id.description)) has no file in \(postsDirectory): "
            + "its file name \(name) is that of post \(StoreNames.printable(owner.description)) (the ids' hashes collide); "
            + "it is served from the log as any post")
    }
}
