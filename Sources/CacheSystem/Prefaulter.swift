#if canImport(Glibc)
import Glibc
#endif

/// Arrays made ahead, with their pages already faulted in, on a thread of
/// their own: while one core replays a log, the other takes the kernel's
/// clearing of the fresh pages the replay's tables grow into (page faults
/// were 741 of the 2,221 samples of a 10,000,000-record replay, 34 of 176
/// at 1,000,000: docs/performance.md, "Start-up").
///
/// A table about to need a larger array (a chunk more, a doubled index)
/// asks for it with `prepare` a while before, and `take`s it when it needs
/// it: the one made, or nil when it is not ready (the table then allocates
/// its own, as it would without this). Only the thread that set `current`
/// (the replaying one) finds a prefaulter.
///
/// The thread only touches an array it made and has not yet handed out,
/// so nothing another part of the process owns is ever faulted; an array is
/// handed over, never shared (an array still referred to would be copied
/// by its first append). At most one array waits per key, at most
/// `maxPending` in all; `stop` (or the last reference's going) frees those
/// not taken and gives their pages back (`Memory.returnFreePages`: an array
/// made on this thread may lie in its own malloc arena, which keeps a freed
/// block's pages), so a replay leaves no idle pages resident.
public final class Prefaulter: Sendable {
    /// Which array is meant: its element type, a purpose, and its capacity.
    public struct Key<Element: Sendable>: Sendable {
        fileprivate let raw: RawKey

        /// An array of `Element` of `capacity`, for `purpose` (a number the
        /// table chooses, so that two tables' arrays of one type and size
        /// are told apart).
        public init(purpose: Int, capacity: Int) {
            raw = RawKey(type: ObjectIdentifier(Element.self), purpose: purpose, capacity: capacity)
        }
    }

    fileprivate struct RawKey: Hashable, Sendable {
        let type: ObjectIdentifier
        let purpose: Int
        let capacity: Int
    }

    /// The prefaulter of the replay running on this thread, if any.
    @TaskLocal public static var current: Prefaulter?

    /// The most arrays asked for and not yet taken: a bound, not a need (a
    /// replay's tables ask for five or so at most at once).
    public static let maxPending = 16

    /// How much of an array is made between two looks at `stop`.
    public static let piece = 4 << 20

    private let state: Monitor<State>

    /// An `[Element]`, taken back out by `take`, whose key names the type.
    private struct Made: Sendable {
        var array: any Sendable
    }

    private struct State: Sendable {
        var queue: [(RawKey, @Sendable (_ stopped: @Sendable () -> Bool) -> Made)] = []
        var waiting: [RawKey: Made] = [:]
        var making: RawKey?
        /// The key being made was withdrawn: what is made is dropped.
        var withdrawn = false
        var stopped = false
        var taken: [Int: Int] = [:]
        var pending: Int { queue.count + waiting.count + (making == nil ? 0 : 1) }
    }

    /// Starts the thread, named `name`; nil when it cannot be created
    /// (nothing is then made ahead).
    public init?(threadName name: String = "cached-prefault") {
        state = Monitor(State())
        do throws(SystemError) {
            try Threads.start(name: name) { [state] in Self.run(state) }
        } catch {
            return nil
        }
    }

    deinit { stop() }

    /// Asks for an array of `key`'s capacity: empty, or holding `filled`
    /// in every place; its pages faulted in. Nothing is asked when one for
    /// `key` is already being made or waits, or when `maxPending` are.
    public func prepare<Element>(_ key: Key<Element>, filledWith filled: Element? = nil) {
        let raw = key.raw
        state.update { s in  // every waiter: the thread, or one in `waitUntilMade`
            guard !s.stopped, s.pending < Self.maxPending, s.making != raw, s.waiting[raw] == nil,
                  !s.queue.contains(where: { $0.0 == raw }) else { return }
            s.queue.append((raw, { stopped in Made(array: Self.faulted(capacity: raw.capacity, filled, stopped: stopped)) }))
        }
    }

    /// The array made for `key`, if it is ready. When it is not: with
    /// `withdrawing` the ask is withdrawn (a table that grew on its own will
    /// not ask for that size again: what is being made is dropped), else it
    /// stays asked for, and waits once made (a chunk of a fixed size).
    public func take<Element>(_ key: Key<Element>, withdrawing: Bool = false) -> [Element]? {
        let raw = key.raw
        let made = state.update(wake: .none) { s -> Made? in
            if let made = s.waiting.removeValue(forKey: raw) {
                s.taken[raw.purpose, default: 0] += 1
                return made
            }
            if withdrawing {
                s.queue.removeAll { $0.0 == raw }
                if s.making == raw { s.withdrawn = true }
            }
            return nil
        }
        return made?.array as? [Element]
    }

    /// Withdraws the ask for `key`: a table that grew past that size will
    /// never take it. An array made for it is freed (a large one's pages go
    /// back at once, being mapped on their own), one being made dropped
    /// once made.
    public func withdraw<Element>(_ key: Key<Element>) {
        let raw = key.raw
        let made = state.update(wake: .none) { s -> Made? in
            s.queue.removeAll { $0.0 == raw }
            if s.making == raw { s.withdrawn = true }
            return s.waiting.removeValue(forKey: raw)
        }
        _ = consume made  // freed here, outside the lock
    }

    /// How many arrays were taken, of every purpose or of one.
    public func taken(purpose: Int? = nil) -> Int {
        state.update(wake: .none) { s in purpose.map { s.taken[$0, default: 0] } ?? s.taken.values.reduce(0, +) }
    }

    /// Whether nothing is asked for or being made.
    public var isIdle: Bool { state.update(wake: .none) { $0.queue.isEmpty && $0.making == nil } }

    /// Waits until every array asked for is made (a test's way to find
    /// each ready when it is taken).
    public func waitUntilMade() {
        state.wait { s in s.queue.isEmpty && s.making == nil ? () : nil }
    }

    /// Ends the thread (an array being made is given up within `piece`
    /// bytes) and frees the arrays made and not taken.
    public func stop() {
        let unused = state.update { s -> [RawKey: Made] in
            s.stopped = true
            s.queue = []
            defer { s.waiting = [:] }
            return s.waiting
        }
        if !unused.isEmpty {
            _ = consume unused
            Memory.returnFreePages()
        }
    }

    private static func run(_ state: Monitor<State>) {
        let stopped: @Sendable () -> Bool = { state.update(wake: .none) { $0.stopped } }
        while true {
            let next = state.wait { s -> (RawKey, @Sendable (@Sendable () -> Bool) -> Made)?? in
                if s.stopped { return .some(nil) }
                guard !s.queue.isEmpty else { return nil }
                let job = s.queue.removeFirst()
                s.making = job.0
                s.withdrawn = false
                return job
            }
            guard let (key, make) = next else { return }
            var made: Made? = make(stopped)
            // Wakes `waitUntilMade` (the thread itself waits for asks only).
            let dropped = state.update { s -> Bool in
                s.making = nil
                let keep = !s.stopped && !s.withdrawn
                // Handed over, not kept: see the type's comment.
                if keep { s.waiting[key] = made }
                made = nil
                return !keep
            }
            if dropped { Memory.returnFreePages() }
        }
    }

    /// An array of `capacity` elements, empty or all `filled`, whose pages
    /// are faulted in: by writing them (a zero into each page of an empty
    /// one's room, the elements into a filled one), a `piece` at a time,
    /// giving up when `stopped`. Not `MADV_POPULATE_WRITE`: it holds the
    /// process's memory map lock for the whole range, and the replaying
    /// thread's own allocations (`mmap`) waited on it (performance.md,
    /// "Start-up": the 10,000,000-record replay took 3.0-4.2 s against 2.1-2.9).
    private static func faulted<Element>(capacity: Int, _ filled: Element?, stopped: () -> Bool) -> [Element] {
        [Element](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            initialized = 0
            guard let base = buffer.baseAddress else { return }
            let step = max(1, piece / max(1, MemoryLayout<Element>.stride))
            for start in stride(from: 0, to: capacity, by: step) {
                if stopped() { return }
                let end = min(capacity, start + step)
                if let filled {
                    (base + start).initialize(repeating: filled, count: end - start)
                    initialized = end
                } else {
                    // Room not yet an element's: raw bytes, which this thread alone holds.
                    Memory.touchPages(UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(base + start),
                                                                    count: (end - start) * MemoryLayout<Element>.stride))
                }
            }
        }
    }
}
