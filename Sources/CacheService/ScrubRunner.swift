import CacheStore
import CacheSystem

/// What the scrub needs of the store (`Store` is one).
protocol ScrubStore: Sendable {
    /// `scrub.state` as it was left.
    func readScrubState() -> ScrubStateFile
    /// Writes `scrub.state` durably.
    func writeScrubState(_ scrub: ScrubState) throws(StoreError)
    /// The objects after `position` in hash order (all of them from nil).
    func objectsInHashOrder(after position: Hash128?) -> [ObjectRef]
    /// The object named `hash`, when the index has it.
    func objectRef(_ hash: Hash128) -> ObjectRef?
    /// Hashes the object again whatever `verify-reads` says, leaving its use
    /// time alone, stopping within a piece when the store stops; a corrupt
    /// or unreadable object is set aside (and its repair begun) by the store.
    func rehash(_ hash: Hash128) throws(StoreError)
}

extension Store: ScrubStore {
    func rehash(_ hash: Hash128) throws(StoreError) {
        let (fd, _) = try openVerified(hash, rehash: true, touching: false, stoppable: true)
        fd.close()
    }
}

/// The scrub (docs/operations.md, "Scrub"), a component that owns its state
/// (`Scrubber`: the settings, the stop flag, the progress) and its thread:
/// `cached-scrub` re-hashes every object in hash order, paced to
/// `scrub-rate`, one pass every `scrub-interval`, in every `verify-reads`
/// mode; its findings are handled as a read's are, and its position is kept
/// in `scrub.state`, so a pass resumes across restarts. It reaches the store
/// through `ScrubStore` and the repairs through `awaitRepair`, so it is
/// tested alone (`ScrubRunnerTests`).
final class ScrubRunner: Sendable {
    private let store: any ScrubStore
    private let log: Logger
    /// Calls back with whether a set-aside object came back (downloaded again).
    private let awaitRepair: @Sendable (Hash128, @escaping @Sendable (Bool) -> Void) -> Void
    /// The settings, stop flag and progress the thread shares.
    let scrubber: Scrubber

    init(_ settings: ScrubSettings, store: any ScrubStore, log: Logger,
         awaitRepair: @escaping @Sendable (Hash128, @escaping @Sendable (Bool) -> Void) -> Void) {
        scrubber = Scrubber(settings)
        self.store = store
        self.log = log
        self.awaitRepair = awaitRepair
    }

    /// New `scrub-interval` and `scrub-rate` (a reload): taken at once.
    func apply(_ settings: ScrubSettings) { scrubber.apply(settings) }

    /// The scrub's part of `status`.
    func status() -> ScrubStatus { scrubber.status() }

    /// Reads `scrub.state` (so that `status` shows it from the first answer)
    /// and starts the `cached-scrub` thread; it idles while scrub-interval is 0.
    func start() {
        let daemonStart = Clock.wallSeconds()
        let startNow = loadScrubState()
        let next = nextScrub(daemonStart: daemonStart, startNow: startNow)
        scrubber.progress.withLock { $0.nextStart = next }
        scrubber.noteStarted()
        do throws(SystemError) {
            try Threads.start(name: "cached-scrub") { [self] in
                scrubLoop(daemonStart: daemonStart, startNow: startNow)
                scrubber.noteStopped()
            }
        } catch {
            scrubber.noteStopped()
            log.error("cannot start the cached-scrub thread (\(error)): no scrub runs until a restart")
        }
    }

    /// Stops the thread, mid-pass too (its position is saved), waiting
    /// `stopTimeout` at most: it stops within the hashing of one object.
    func stop() {
        if !scrubber.stop(timeout: Self.stopTimeout) {
            log.warning("scrub: still hashing an object at exit; that check is abandoned")
        }
    }

    /// The longest hash of one object (64 MiB, max-object-size's default,
    /// from a slow disk) fits; the whole stop stays well inside systemd's 90 s.
    static let stopTimeout = Duration.seconds(2)

    /// Waits for each pass's time and runs it, until the daemon stops.
    /// `startNow`: scrub.state was damaged, a new pass is due at once.
    private func scrubLoop(daemonStart: Int64, startNow: Bool) {
        var startNow = startNow
        while true {
            let (settings, generation, stopping) = scrubber.snapshot
            if stopping { return }
            let goOn: Bool
            if settings.isOff {
                scrubber.progress.withLock { $0.nextStart = nil }
                goOn = scrubber.pause(for: .seconds(3600), generation: generation)
            } else if let pass = scrubber.progress.withLock({ $0.state.current }) {
                goOn = scrubPass(pass)
            } else {
                goOn = awaitPass(daemonStart: daemonStart, startNow: &startNow, generation: generation)
            }
            if !goOn { return }
        }
    }

    /// Begins a pass when one is due, else waits (a minute at most, so that
    /// a clock set forward or back is noticed); false once stopping.
    private func awaitPass(daemonStart: Int64, startNow: inout Bool, generation: Int) -> Bool {
        let now = Clock.wallSeconds()
        let next = nextScrub(daemonStart: daemonStart, startNow: startNow, now: now) ?? now
        scrubber.progress.withLock { $0.nextStart = next }
        guard next <= now else { return scrubber.pause(for: .seconds(min(next - now, 60)), generation: generation) }
        startNow = false
        scrubber.progress.withLock { p in
            p.state.current = ScrubState.Pass(started: now)
            p.nextStart = nil
        }
        saveScrubState()
        return true
    }

    /// When the next pass starts by the settings in effect; nil when off,
    /// or when one is under way.
    private func nextScrub(daemonStart: Int64, startNow: Bool, now: Int64 = Clock.wallSeconds()) -> Int64? {
        let settings = scrubber.settings
        let (current, last) = scrubber.progress.withLock { ($0.state.current, $0.state.last?.started) }
        guard !settings.isOff, current == nil else { return nil }
        if startNow { return now }
        return ScrubSchedule.nextStart(lastStarted: last, interval: settings.interval, daemonStart: daemonStart, now: now)
    }

    /// Takes `scrub.state` as it was left; true when it was damaged, and a
    /// new pass is to start at once.
    private func loadScrubState() -> Bool {
        switch store.readScrubState() {
        case .absent:
            return false
        case .found(let state):
            scrubber.progress.withLock { $0.state = state }
            return false
        case .damaged(let why):
            log.warning("scrub: \(why); it is replaced, and a new pass starts as soon as the scrub runs")
            return true
        }
    }

    /// Runs `pass` (from its position, when it is resumed) to its end; false
    /// once the daemon is stopping. Scrub-interval 0 pauses it where it is.
    private func scrubPass(_ pass: ScrubState.Pass) -> Bool {
        let refs = store.objectsInHashOrder(after: pass.position)
        notePassStart(pass, refs)
        var pacer = ScrubPacer(rate: scrubber.settings.rate)
        let checkpoint = ScrubSchedule.checkpoint(interval: scrubber.settings.interval)
        var saved = Clock.monotonicNanoseconds()
        for ref in refs {
            let (settings, _, stopping) = scrubber.snapshot
            guard !stopping, !settings.isOff else {
                saveScrubState()
                if stopping { notePassStopped() }
                return !stopping
            }
            pacer.change(rate: settings.rate)
            let paced = scrubOne(ref, &pacer)
            if !paced || Clock.elapsed(since: saved) >= checkpoint {
                saveScrubState()
                saved = Clock.monotonicNanoseconds()
            }
            if !paced {
                notePassStopped()
                return false
            }
        }
        finishPass()
        return true
    }

    /// Checks one object, counts what was found, and waits as the rate says;
    /// false once stopping. A check cut short by shutdown is not counted,
    /// so the position stays before that object and the next start checks it.
    private func scrubOne(_ ref: ObjectRef, _ pacer: inout ScrubPacer) -> Bool {
        let start = Clock.monotonicNanoseconds()
        let finding = check(ref.hash)
        if finding == .stopped { return false }
        scrubber.progress.withLock { $0.record(ref, finding) }
        return pace(&pacer, ref.size, startedAt: start)
    }

    /// Waits until `pacer` lets the next object begin, `size` bytes having
    /// been hashed from `start` on; false once stopping. A reload of the
    /// rate, or of the interval to 0, ends the wait.
    private func pace(_ pacer: inout ScrubPacer, _ size: Int64, startedAt start: UInt64) -> Bool {
        let next = pacer.hashed(size, startedAt: start)
        while true {
            let now = Clock.monotonicNanoseconds()
            guard next > Clock.instant(after: ScrubPacer.smallestPause, from: now) else { return true }
            let (settings, generation, stopping) = scrubber.snapshot
            if stopping { return false }
            if settings.rate != pacer.rate || settings.isOff { return true }
            _ = scrubber.pause(for: .nanoseconds(next - now), generation: generation)
        }
    }

    /// Hashes one object whatever `verify-reads` says, leaving its use time
    /// alone, and handles what is found as a read would (`scrubFinding`).
    /// The hash stops within one piece once shutdown raises the store's
    /// stop flag (`stopped`).
    func check(_ hash: Hash128) -> ScrubFinding {
        guard store.objectRef(hash) != nil else { return .skipped }
        do throws(StoreError) {
            try store.rehash(hash)
            return .clean
        } catch {
            return scrubFinding(hash, error)
        }
    }

    /// A corrupt or unreadable object was set aside by the store, which
    /// logged and counted it once and began its repair (`objectSetAside`):
    /// the scrub counts it and logs how the repair went. A missing file's
    /// rows are downloaded again when next asked for, as after any file
    /// that went missing.
    private func scrubFinding(_ hash: Hash128, _ error: StoreError) -> ScrubFinding {
        switch error {
        case .corruptObject:
            repairFound(hash, "corrupt")
            return .corrupt
        case .unreadableObject:
            repairFound(hash, "unreadable")
            return .unreadable
        case .missingObject:
            log.warning("scrub: \(error): its file is gone; its rows are downloaded again when next asked for")
            return .missing
        case .stopped:
            return .stopped
        default:
            log.warning("scrub: object \(hash) not checked: \(error)")
            return .skipped
        }
    }

    /// Logs how the repair of a found object went.
    private func repairFound(_ hash: Hash128, _ found: String) {
        awaitRepair(hash) { [log] back in
            if back {
                log.notice("scrub: object \(hash), found \(found), was downloaded again")
            } else {
                log.warning("scrub: object \(hash), found \(found), was not downloaded again (no row names it, or the origin no longer gives its bytes)")
            }
        }
    }

    /// Records the pass under way as the last one, and saves and logs it.
    private func finishPass() {
        let now = Clock.wallSeconds()
        let done = scrubber.progress.withLock { $0.finish(at: now) }
        saveScrubState()
        guard let done else { return }
        let t = done.totals
        let what = "scrub: pass over \(t.objects) objects (\(formatSize(t.bytes))) finished in \(done.ended - done.started) s"
        if t.findings == 0 {
            log.notice(what + ": nothing found")
        } else {
            log.warning(what + ": \(t.corrupt) corrupt, \(t.unreadable) unreadable, \(t.missing) missing (each logged above)")
        }
    }

    /// Logs a pass stopped by shutdown: how far it got (its position was saved).
    private func notePassStopped() {
        let (checked, total) = scrubber.progress.withLock { ($0.state.current?.totals.objects ?? 0, $0.passObjects) }
        log.notice("scrub: pass stopped at \(NumberText.grouped(checked)) of \(NumberText.grouped(total)) objects, its position saved; "
                   + "it resumes there at the next start")
    }

    /// Sets what the pass covers in all (`status`'s progress) and logs its start.
    private func notePassStart(_ pass: ScrubState.Pass, _ refs: [ObjectRef]) {
        scrubber.progress.withLock { p in
            p.passObjects = pass.totals.objects + refs.count
            p.passBytes = pass.totals.bytes + refs.reduce(0) { $0 + $1.size }
        }
        let rate = formatSize(scrubber.settings.rate)
        if let position = pass.position {
            log.notice("scrub: resuming the pass started \(max(0, Clock.wallSeconds() - pass.started)) s ago after object \(position) "
                       + "(\(pass.totals.objects) checked, \(refs.count) to go) at \(rate)/s")
        } else {
            log.info("scrub: pass started over \(refs.count) objects at \(rate)/s")
        }
    }

    /// Writes `scrub.state`; a failure is logged (once an hour) and the scrub goes on.
    private func saveScrubState() {
        let state = scrubber.progress.withLock { $0.state }
        do throws(StoreError) { try store.writeScrubState(state) } catch {
            if let held = scrubber.saveFailures.withLock({ $0.admit("save") }) {
                log.warning("scrub: could not save its position in scrub.state: \(error); "
                            + "a restart resumes from the last position saved" + LogThrottle.suffix(held))
            }
        }
    }
}

extension Scrubber.Progress {
    /// Counts `finding` for `ref` in the pass under way and since the start.
    mutating func record(_ ref: ObjectRef, _ finding: ScrubFinding) {
        guard var pass = state.current else { return }
        pass.position = ref.hash
        pass.totals.count(finding, size: ref.size)
        state.current = pass
        sinceStart.count(finding, size: ref.size)
        if finding == .skipped {
            // It left the index: the pass covers one object fewer.
            passObjects -= 1
            passBytes -= ref.size
        }
    }

    /// Ends the pass under way at `now`; what it came to.
    mutating func finish(at now: Int64) -> ScrubState.Finished? {
        guard let pass = state.current else { return nil }
        let done = ScrubState.Finished(started: pass.started, ended: max(now, pass.started), totals: pass.totals)
        state.last = done
        state.current = nil
        return done
    }
}
