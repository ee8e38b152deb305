import CacheSystem

/// Closing the store, and the writers of its files that a close must not
/// cut from under them (docs/architecture.md, "Shutdown"): a closed store
/// refuses every write; a writer already running keeps the directory open,
/// and the last of them closes it.
extension Store {
    /// Releases the log and the locks. A second call does nothing (closing
    /// a descriptor number twice could close another file that reused it).
    /// `clean`: the daemon stopped with nothing left running on the store,
    /// and records so in `posts.state` when every post file matches the log
    /// (`recordCleanStop`), so that the next start need not check them.
    ///
    /// Every write after it is refused (`StoreError.writesStopped`, "the
    /// store is closed"): a thread the daemon's shutdown stopped waiting for
    /// (a disk that hangs) must not write through descriptors closed here,
    /// whose numbers the process may already have given to other files. A
    /// file writer already past its check keeps the store's directory open
    /// (`writingFiles`): the last of them to end closes it.
    public func close(clean: Bool = false) {
        guard closed.withLock({ c -> Bool in defer { c = true }; return !c }) else { return }
        if clean { recordCleanStop() }
        stopReason.withLock { $0 = $0 ?? Self.closedReason }
        writer.withLock { w in
            w.stopped = w.stopped ?? Self.closedReason
            w.log.close()
        }
        lockFD.close()
        let writing = fileWriters.withLock { w -> Int in
            w.directoryLeftOpen = w.running > 0
            return w.running
        }
        if writing == 0 {
            directoryFD.close()
        } else {
            configuration.onWarning?("\(directory) stays open until the \(writing) file write(s) running at close end; later ones are refused")
        }
    }
    /// Why writes are refused once the store is closed.
    static let closedReason = "the store is closed"

    /// Runs `body`, a writer of the store's files outside the writer lock
    /// (an object's placement, a posts refresh's files), after
    /// `checkWritable`: refused once writes stopped or the store was closed,
    /// and counted while it runs, so that `close` leaves the store's
    /// directory open under it. Counted before the check: a writer `close`
    /// did not count sees the stop.
    func writingFiles<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        enterFileWriter()
        defer { leaveFileWriter() }
        try checkWritable()
        return try body()
    }

    func enterFileWriter() { fileWriters.withLock { $0.running += 1 } }

    /// The last file writer to leave a closed store closes the directory
    /// `close` left open under it.
    func leaveFileWriter() {
        let last = fileWriters.withLock { w -> Bool in
            w.running -= 1
            guard w.running == 0, w.directoryLeftOpen else { return false }
            w.directoryLeftOpen = false
            return true
        }
        if last { directoryFD.close() }
    }

    /// Runs `body`, which uses the store's directory and ends on its own
    /// (the start's reconciliation of post files, which stops at the stop
    /// flag), counted as `writingFiles` counts but not refused.
    func holdingDirectory<T>(_ body: () -> T) -> T {
        enterFileWriter()
        defer { leaveFileWriter() }
        return body()
    }

    /// Removes a temp file of this store (an `ObjectWriter`'s), unless the
    /// store is closed: its directory descriptor may name another file by
    /// then, and `tmp/` is emptied at the next open anyway.
    func removeTemp(_ path: String) throws(SystemError) {
        enterFileWriter()
        defer { leaveFileWriter() }
        guard !closed.withLock({ $0 }) else { return }
        try files.unlink(path)
    }
}
