#if canImport(Glibc)
import Glibc
#endif
import CacheFetch
import CacheStore
import CacheSystem
import CacheVariant

/// Opening the store and the HTTP client, start-up recovery, the access-time
/// thread, and shutdown in the order that loses nothing.
extension CacheService {
    /// Opens the store in `configuration.storeDirectory` (replaying its log,
    /// and logging what recovery did) and starts the worker pool and the
    /// HTTP client.
    public static func open(_ configuration: ServiceConfiguration, userAgent: String, log: Logger) throws(CacheError) -> CacheService {
        var storeConfiguration = StoreConfiguration(directory: configuration.storeDirectory, maxBytes: configuration.maxBytes)
        storeConfiguration.compactionSlack = configuration.compactionSlack
        storeConfiguration.verifyReads = configuration.verifyReads
        storeConfiguration.maxVariantBytes = configuration.maxVariantBytes
        storeConfiguration.onWritesStopped = { [log] why in
            log.error("store writes stopped: \(why); reads go on, every write now fails; restart cached to reopen the store")
        }
        storeConfiguration.onIgnoredEntry = { [log] line in log.warning(line) }
        storeConfiguration.onWarning = { [log] line in log.warning(line) }
        storeConfiguration.onNotice = { [log] line in log.notice(line) }
        // The service does not exist yet: the store reports to it through this.
        let setAside = SetAsideRelay()
        storeConfiguration.onSetAside = { setAside.report($0) }
        let store: Store
        do { store = try Store(storeConfiguration) } catch { throw .store(error, doing: "cannot open the store") }
        // The replay's temporaries (records, the growing tables' old storage) go back to the system.
        Memory.returnFreePages()
        logRecovery(store, log)
        let t = store.openTimes
        log.info("store opened: the log replayed in \(Self.milliseconds(t.replay)) ms, the titles located in \(Self.milliseconds(t.titles)) ms, the posts ordered in \(Self.milliseconds(t.order)) ms")
        let verification = store.readVerification
        log.notice("verify-reads: \(verification.mode.rawValue) (\(verification.reason))")
        if let p = configuration.variantPool {
            log.info("variants: made by \(p.executable), at most \(p.helpers) at once, \(formatSize(p.memory)) of address space each")
        } else {
            log.warning("variants: off, \(VariantHelpers.programName) was not found (looked for "
                        + VariantHelpers.candidates().joined(separator: ", ") + "); image variants are refused")
        }
        var policy = configuration.fetch
        policy.userAgent = userAgent
        let http: HTTPClient, pool: WorkerPool, commits: WorkerPool
        do throws(SystemError) {
            http = try HTTPClient(policy: policy, credentials: configuration.credentials)
            pool = try WorkerPool(threads: configuration.workerThreads, name: "cached-worker")
            commits = try WorkerPool(threads: configuration.commitThreads, name: "cached-sync")
        } catch {
            store.close()
            throw .store(.io(error), doing: "cannot start the daemon's threads")
        }
        let service = CacheService(store: store, http: http, pool: pool, commits: commits, log: log, configuration: configuration)
        setAside.connect(service)
        return service
    }

    /// The store directory, resolved (links and relative spellings followed once).
    public var storeDirectory: String { store.directory }

    /// A span in whole milliseconds, for the log.
    static func milliseconds(_ d: Duration) -> UInt64 { d.wholeNanoseconds / 1_000_000 }

    /// What recovery did when the store was opened.
    private static func logRecovery(_ store: Store, _ log: Logger) {
        if let r = store.recovery {
            log.warning("index.log was damaged (\(r.problem)); kept \(r.cutOffset) bytes, moved \(r.cutLength) bytes from offset \(r.cutOffset) to \(r.savedTo)")
        }
        for feed in store.damagedValidators.sorted(by: { $0.rawValue < $1.rawValue }) {
            log.warning("the stored ETag or Last-Modified of the \(feed == .posts ? "posts feed" : "image manifest") held a control character and was dropped; its next refresh is unconditional")
        }
    }

    /// Starts what need not delay readiness: post files that differ from
    /// the log are rewritten (unless the store stopped cleanly with none
    /// differing: `Store.postFilesCheck`), objects whose files went missing
    /// are dropped, use times reach the log once a minute (so eviction
    /// order survives restarts) and the heap is trimmed after large work
    /// (`trimWanted`), and the scrub's thread starts (`ScrubRunner.start`). Both
    /// start-up passes stop early at shutdown (`Store.stopPasses`), saying
    /// how far they got, and run again at the next start.
    public func start() {
        pool.submit { [self] in
            reconcilePostFiles()
            checkObjectFiles()
            // Both passes built tables of every post's and object's name.
            Memory.returnFreePages()
        }
        startThread("cached-access", does: "use times reach the log only at shutdown") { [self] in
            var last = Clock.monotonicNanoseconds()
            while !stopping.withLock({ $0 }) {
                sleep(1)
                if trimWanted.withLock({ w in defer { w = false }; return w }) { Memory.returnFreePages() }
                if Clock.elapsed(since: last) >= Self.accessLogInterval {
                    logAccessTimes()
                    last = Clock.monotonicNanoseconds()
                }
            }
        }
        scrub.start()
    }

    /// The start's reconciliation of `posts/`, logged: skipped after a
    /// clean stop, else why it runs, and how it ended (or how far it got).
    private func reconcilePostFiles() {
        if let why = store.postFilesCheck, !store.isStopping {
            log.info("post files: checking every post file against the index: \(why)")
        }
        let began = Clock.monotonicNanoseconds()
        let r = store.reconcilePostFilesAtStart()
        let n = NumberText.grouped
        if r.stopped {
            log.notice("post files: reconciliation stopped at \(n(r.checked)) of \(n(r.total)) (\(n(r.fixed)) rewritten); it restarts at the next start")
        } else if r.reason == nil {
            log.info("post files: not checked; the daemon stopped cleanly last time, and index.log and posts/ are as it left them")
        } else {
            let took = NumberText.fixed(Clock.elapsed(since: began).inSeconds, 1)
            if r.fixed > 0 {
                log.notice("post files: rewrote \(n(r.fixed)) post files to match the index (\(n(r.checked)) checked in \(took) s)")
            } else {
                log.info("post files: all \(n(r.checked)) match the index (checked in \(took) s)")
            }
        }
    }

    /// The start's sweep of object files, logged.
    private func checkObjectFiles() {
        do throws(StoreError) {
            let r = try store.dropMissingObjects()
            if r.dropped > 0 {
                log.warning("\(r.dropped) objects named in the index had no file or the wrong size; their rows will be fetched again on demand")
            }
            if r.stopped {
                log.notice("objects: the check of object files stopped at \(NumberText.grouped(r.checked)) of \(NumberText.grouped(r.total)); "
                           + "it runs again at the next start")
            }
        } catch { log.warning("could not check object files: \(error)") }
    }

    /// Starts a thread of the service's own; one that cannot start is
    /// logged, saying what will not happen (`does`).
    func startThread(_ name: String, does consequence: String, _ body: @escaping @Sendable () -> Void) {
        do throws(SystemError) { try Threads.start(name: name, body) } catch {
            log.error("cannot start the \(name) thread (\(error)): \(consequence)")
        }
    }

    /// Use times are logged once a minute: a crash loses at most a minute of
    /// eviction order, and an idle store writes nothing.
    static let accessLogInterval = Duration.seconds(60)

    private func logAccessTimes() {
        do { try store.logAccessTimes() } catch { log.warning("could not log access times: \(error)") }
    }

    /// Asks every long pass to stop (`Store.stopPasses`: the start's
    /// passes, compaction, gc, `verify`, the scrub's hash), stops the scrub
    /// (its position saved), cancels transfers (their temp files are
    /// discarded), lets the commit threads and then the workers finish what
    /// is queued (commits in progress complete or roll back; a pass they run
    /// returns early; nothing queues a commit once transfers are cancelled:
    /// a failed transfer is reported by a worker), and
    /// only then logs the use times and closes the store, recording a clean
    /// stop when the workers all ended (`Store.close(clean:)`). Anything
    /// abandoned in tmp/ is removed at the next start. Returns whether
    /// every thread ended within its deadline (the stop was clean).
    @discardableResult
    public func shutdown() -> Bool {
        stopping.withLock { $0 = true }
        store.stopPasses()
        scrub.stop()
        variants.stop()
        // A fetch thread still blocked (in a write to a failing disk) may
        // yet hand a finished transfer over: no clean stop is claimed then.
        let transfersEnded = http.shutdown(timeout: Self.transferCancelTimeout)
        // One deadline for both drains: the commit threads first (their
        // completions queue work on the workers), then the workers.
        let deadline = Clock.instant(after: Self.workerDrainTimeout)
        let committed = commits.stop(timeout: Clock.elapsed(since: Clock.monotonicNanoseconds(), now: deadline))
        let drained = pool.stop(timeout: Clock.elapsed(since: Clock.monotonicNanoseconds(), now: deadline)) && committed && transfersEnded
        if !drained { log.warning("workers still busy at exit; their work is abandoned") }
        logAccessTimes()
        store.close(clean: drained)
        return drained
    }

    /// The units stop the daemon with `TimeoutStopSec=15s` (systemd/): the
    /// scrub's 2 s (`ScrubRunner.stopTimeout`), 5 s for transfers and 7 s
    /// for the commit threads and workers together stay inside it.
    static let transferCancelTimeout = Duration.seconds(5)
    static let workerDrainTimeout = Duration.seconds(7)
}

/// Carries the store's `onSetAside` reports to the service, which is made
/// after the store (weakly held: the store's configuration must not keep
/// the service alive).
final class SetAsideRelay: Sendable {
    private let target = Locked<WeakService>(WeakService())

    private struct WeakService: Sendable {
        weak var service: CacheService?
    }

    func connect(_ service: CacheService) { target.withLock { $0.service = service } }

    func report(_ s: SetAside) {
        target.withLock { $0.service }?.objectSetAside(s)
    }
}
