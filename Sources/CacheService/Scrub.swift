import CacheStore
import CacheSystem

/// The scrub's settings (`scrub-interval`, `scrub-rate`): a reload (SIGHUP)
/// changes them in the running scrub (`CacheService.apply(_:)`).
public struct ScrubSettings: Sendable, Equatable {
    /// From the start of one pass over every object to the start of the
    /// next (counted in whole seconds); zero or less: no scrub.
    public var interval: Duration
    /// Bytes hashed per second at most.
    public var rate: Int64

    public init(interval: Duration = ScrubSettings.defaultInterval, rate: Int64 = ScrubSettings.defaultRate) {
        self.interval = interval
        self.rate = max(1, rate)
    }

    /// A week: every object is re-hashed about 52 times a year.
    public static let defaultInterval = Duration.seconds(604_800)
    /// 8 MiB/s: a 100 GiB store in under four hours of a week, a small share of any disk.
    public static let defaultRate: Int64 = 8 << 20

    /// True when no scrub runs.
    public var isOff: Bool { interval <= .zero }
}

/// Keeps the bytes hashed per second under the rate. Each object hashed
/// pushes the earliest start of the next one by its size over the rate,
/// counted from when it began, so the hashing itself counts; time spent
/// waiting for something else (a slow disk, the schedule) earns no credit
/// for a burst later. Instants are `Clock.monotonicNanoseconds()` readings.
struct ScrubPacer: Sendable, Equatable {
    private(set) var rate: Int64
    /// When the next object may begin.
    private(set) var next: UInt64 = 0

    init(rate: Int64) { self.rate = max(1, rate) }

    /// Notes `bytes` hashed from `start` on; returns when the next object may begin.
    mutating func hashed(_ bytes: Int64, startedAt start: UInt64) -> UInt64 {
        next = Clock.instant(after: Self.time(bytes, at: rate), from: max(next, start))
        return next
    }

    /// A new rate: what was owed at the old one is forgiven.
    mutating func change(rate newRate: Int64) {
        guard max(1, newRate) != rate else { return }
        rate = max(1, newRate)
        next = 0
    }

    /// How long `bytes` take at `rate` bytes per second (whole seconds
    /// exactly, the rest to the nanosecond).
    static func time(_ bytes: Int64, at rate: Int64) -> Duration {
        let bytes = max(0, bytes), rate = max(1, rate)
        return .seconds(bytes / rate) + .nanoseconds(Int64(Double(bytes % rate) * 1e9 / Double(rate)))
    }

    /// Waits shorter than this are not worth a sleep: small objects are
    /// hashed back to back until a millisecond is owed.
    static let smallestPause = Duration.milliseconds(1)
}

/// When passes start and how often a pass saves its position.
enum ScrubSchedule {
    /// A store never scrubbed, or one whose pass is due when the daemon
    /// starts, is scrubbed no sooner than this after the start (or
    /// `scrub-interval`, when shorter): a start has work enough.
    static let startupDelay = Duration.seconds(600)

    /// When the next pass starts (unix seconds): `interval` after the last
    /// one started, and no sooner than `startupDelay` (or `interval`) after
    /// the daemon started at `daemonStart`, nor before `now`. A last start
    /// in the future (the clock was set back) counts as `now`.
    static func nextStart(lastStarted: Int64?, interval: Duration, daemonStart: Int64, now: Int64) -> Int64 {
        // Whole seconds, and at least one: a pass never starts right after the last.
        let span = max(1, interval.wholeSeconds)
        let earliest = max(now, daemonStart + min(span, startupDelay.wholeSeconds))
        guard let lastStarted else { return earliest }
        return max(min(lastStarted, now) + span, earliest)
    }

    /// The time between saves of a pass's position: once a minute, more
    /// often when passes come more often than every 100 minutes (a hundredth
    /// of the interval, at least a second), so that a short pass resumes too.
    static func checkpoint(interval: Duration) -> Duration {
        .seconds(min(60, max(1, interval.wholeSeconds / 100)))
    }
}

/// The scrub, for `status` (docs/protocol.md, `status`, `scrub`).
public struct ScrubStatus: Sendable, Equatable {
    /// `off` (scrub-interval 0), `idle` (between passes) or `running`.
    public enum State: String, Sendable { case off, idle, running }

    /// What was checked and found: objects and bytes hashed, and the
    /// objects found corrupt, unreadable or missing.
    public struct Counts: Sendable, Equatable {
        public var objects = 0
        public var bytes: Int64 = 0
        public var corrupt = 0
        public var unreadable = 0
        public var missing = 0
    }

    /// The pass under way (or paused by scrub-interval 0).
    public struct Pass: Sendable, Equatable {
        /// When it started, unix seconds (before a restart it resumed across, too).
        public var started: Int64
        /// The last object checked (32 hex digits); nil before the first.
        public var position: String?
        /// The objects and bytes it covers in all.
        public var objects: Int
        public var bytes: Int64
        /// What it has checked and found so far.
        public var checked: Counts
    }

    /// The last pass that ended.
    public struct LastPass: Sendable, Equatable {
        public var started: Int64
        public var ended: Int64
        public var checked: Counts
    }

    public var state: State
    /// `scrub-interval` and `scrub-rate` (bytes per second).
    public var interval: Duration
    public var rate: Int64
    public var pass: Pass?
    public var last: LastPass?
    /// When the next pass starts, unix seconds; nil while one runs or when off.
    public var nextStart: Int64?
    /// Everything checked and found since the daemon started (the counters of `/metrics`).
    public var sinceStart: Counts
}

extension ScrubStatus.Counts {
    init(_ t: ScrubTotals) {
        self.init(objects: t.objects, bytes: t.bytes, corrupt: t.corrupt, unreadable: t.unreadable, missing: t.missing)
    }
}

/// What the scrub found of one object.
enum ScrubFinding: Sendable, Equatable {
    /// Its bytes match its name.
    case clean
    case corrupt, unreadable, missing
    /// Not checked: it left the index, or the check failed for a reason
    /// not its file's (logged).
    case skipped
    /// Not checked: shutdown cut its hash short; it is checked again after the restart.
    case stopped
}

extension ScrubTotals {
    /// Counts `finding` for an object of `size` bytes.
    mutating func count(_ finding: ScrubFinding, size: Int64) {
        guard finding != .skipped, finding != .stopped else { return }
        objects += 1
        bytes += size
        switch finding {
        case .corrupt: corrupt += 1
        case .unreadable: unreadable += 1
        case .missing: missing += 1
        case .clean, .skipped, .stopped: break
        }
    }
}
