import CacheStore
import CacheSystem

/// What the scrub thread shares: its settings and stop flag (a reload and
/// shutdown change them and wake it), and its progress (`status` reads it).
/// The thread itself is `ScrubRunner`'s, which owns this.
final class Scrubber: Sendable {
    struct Control: Sendable {
        var settings: ScrubSettings
        var stopping = false
        /// True from `start` until the thread's loop has returned.
        var threadRunning = false
        /// Bumped by every reload, so a waiting thread looks again.
        var generation = 0
    }

    struct Progress: Sendable {
        /// What `scrub.state` holds (or will at the next save).
        var state = ScrubState()
        /// The objects and bytes the pass under way covers in all.
        var passObjects = 0
        var passBytes: Int64 = 0
        /// When the next pass starts; nil while one runs or when off.
        var nextStart: Int64?
        /// Everything checked since the daemon started.
        var sinceStart = ScrubTotals()
    }

    private let control: Monitor<Control>
    let progress = Locked(Progress())
    /// Failures to save `scrub.state`, logged once an hour.
    let saveFailures = Locked(LogThrottle(interval: .seconds(3600)))

    init(_ settings: ScrubSettings) {
        control = Monitor(Control(settings: settings))
    }

    // Reads through `update` wake a waiter at most, which looks and waits on.
    var settings: ScrubSettings { control.update(wake: .one) { $0.settings } }
    var isStopping: Bool { control.update(wake: .one) { $0.stopping } }
    /// The settings, the reload they came with (for `pause`) and whether the thread is to stop.
    var snapshot: (settings: ScrubSettings, generation: Int, stopping: Bool) {
        control.update(wake: .one) { ($0.settings, $0.generation, $0.stopping) }
    }

    /// New settings, taken by the thread at once (a pass under way goes on at
    /// the new rate; scrub-interval 0 pauses it where it is).
    func apply(_ settings: ScrubSettings) {
        control.update { c in
            c.settings = settings
            c.generation += 1
        }
    }

    /// Marks the thread started (before it is).
    func noteStarted() { control.update { $0.threadRunning = true } }
    /// Marks the thread's loop returned.
    func noteStopped() { control.update { $0.threadRunning = false } }

    /// Asks the thread to stop and waits up to `timeout` for it; false
    /// when it is still running then (hashing one large object on a slow
    /// disk).
    func stop(timeout: Duration) -> Bool {
        control.update { $0.stopping = true }
        return control.wait(for: timeout) { $0.threadRunning ? nil : true } ?? false
    }

    /// Sleeps up to `span`, less when stopped or reloaded since `generation`
    /// (a `snapshot`'s): false once stopping. (The settings may have
    /// changed: take a snapshot again.)
    func pause(for span: Duration, generation: Int) -> Bool {
        _ = control.wait(for: span) { c -> Bool? in c.stopping || c.generation != generation ? true : nil }
        return !isStopping
    }

    /// The scrub's part of `status`.
    func status() -> ScrubStatus {
        let settings = self.settings
        let p = progress.withLock { $0 }
        let pass = p.state.current.map {
            ScrubStatus.Pass(started: $0.started, position: $0.position?.hex, objects: p.passObjects, bytes: p.passBytes,
                             checked: ScrubStatus.Counts($0.totals))
        }
        let last = p.state.last.map { ScrubStatus.LastPass(started: $0.started, ended: $0.ended, checked: ScrubStatus.Counts($0.totals)) }
        let state: ScrubStatus.State = settings.isOff ? .off : pass != nil ? .running : .idle
        return ScrubStatus(state: state, interval: settings.interval, rate: settings.rate, pass: pass, last: last,
                           nextStart: state == .idle ? p.nextStart : nil, sinceStart: ScrubStatus.Counts(p.sinceStart))
    }
}
