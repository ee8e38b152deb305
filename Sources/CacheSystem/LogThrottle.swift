/// Repeated messages of one kind, logged at most once per interval with a
/// count of those held back: an error that recurs thousands of times a
/// second (`accept` failing with `EMFILE`, issue 22: 33 MB/s of log) costs
/// one line per interval. A value owned by one thread; pure, given `now`.
public struct LogThrottle: Sendable {
    private var kinds: [String: (since: UInt64, held: Int)] = [:]
    /// The span in which one line of a kind is logged.
    public let interval: Duration

    public init(interval: Duration = .seconds(10)) {
        self.interval = interval
    }

    /// Whether an occurrence of `kind` at `now` (monotonic ns) is logged:
    /// nil while it is held back, otherwise how many were held back since
    /// the last one logged.
    public mutating func admit(_ kind: String, now: UInt64 = Clock.monotonicNanoseconds()) -> Int? {
        if let k = kinds[kind], Clock.elapsed(since: k.since, now: now) < interval {
            kinds[kind]!.held += 1
            return nil
        }
        let held = kinds[kind]?.held ?? 0
        kinds[kind] = (now, 0)
        return held
    }

    /// " (N more like it since the last)" when `held` > 0, else "".
    public static func suffix(_ held: Int) -> String {
        held > 0 ? " (\(held) more like it not logged)" : ""
    }
}
