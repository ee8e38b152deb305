#if canImport(Glibc)
import Glibc
#endif

/// Arrays made ahead, with their pages already faulted in, on a thread of
/// their own: while one core replays a log, the other takes the kernel's
/// clearing of the fresh pages the replay's tables grow into (a third of
/// the replay of 10,000,000 records, a fifth of 1,000,000's, a quarter of a
/// restart with a million posts: docs/performance.md, "Start-up").
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
/// by its first append). At most one array waits per key, and `stop` frees
/// those not taken and gives their pages back (`Memory.returnFreePages`:
/// an array made on this thread may lie in its own malloc arena, which
/// keeps a freed block's pages), so a replay leaves no idle pages resident.
public final class Prefaulter: Sendable {
    /// Which array is meant: the element type, a purpose, and the capacity.
    public struct Key: Hashable, Sendable {
        let type: ObjectIdentifier
        let purpose: Int
        let capacity: Int

        /// An array of `Element` of `capacity`, for `purpose` (a number the
        /// table chooses, so that two tables' arrays of one type and size
        /// are told apart).
        public init<Element>(_ element: Element.Type, purpose: Int, capacity: Int) {
            type = ObjectIdentifier(element)
            self.purpose = purpose
            self.capacity = capacity
        }
    }

    /// The prefaulter of the replay running on this thread, if any.
    @TaskLocal public static var current: Prefaulter?

    /// The most arrays asked for and not yet taken: a bound, not a need (a
    /// replay's tables ask for five or so at most at once).
    public static let maxPending = 16

    private let state: Monitor<State>

    /// An `[Element]`, taken back out by `take`, which names the type.
    private struct Made: Sendable {
        var array: any Sendable
    }

    private struct State: Sendable {
        var queue: [(Key, @Sendable () -> Made)] = []
        var waiting: [Key: Made] = [:]
        var making: Key?
        var stopped = false
        var taken = 0
        var pending: Int { queue.count + waiting.count + (making == nil ? 0 : 1) }
    }

    /// Starts the thread; nil when it cannot be created (nothing is then
    /// made ahead).
    public init?() {
        state = Monitor(State())
        do throws(SystemError) {
            try Threads.start(name: "cached-prefault") { [state] in Self.run(state) }
        } catch {
            return nil
        }
    }

    /// Asks for an array of `key.capacity` elements: empty, or holding
    /// `filled` in every place; its pages faulted in. Nothing is asked
    /// when one for `key` is already being made or waits, or when
    /// `maxPending` are.
    public func prepare<Element: Sendable>(_ key: Key, filledWith filled: Element? = nil) {
        state.update { s in  // every waiter: the thread, or one in `waitUntilMade`
            guard !s.stopped, s.pending < Self.maxPending, s.making != key, s.waiting[key] == nil,
                  !s.queue.contains(where: { $0.0 == key }) else { return }
            s.queue.append((key, { Made(array: Self.faulted(capacity: key.capacity, filled)) }))
        }
    }

    /// The array made for `key`, if it is ready; nil otherwise (one being
    /// made stays asked for, and waits once made).
    public func take<Element>(_ key: Key, as element: Element.Type = Element.self) -> [Element]? {
        guard let made = state.update(wake: .none, { s -> Made? in
            let made = s.waiting.removeValue(forKey: key)
            if made != nil { s.taken += 1 }
            return made
        }) else { return nil }
        return made.array as? [Element]
    }

    /// How many arrays were taken.
    public var taken: Int { state.update(wake: .none) { $0.taken } }

    /// Waits until every array asked for is made (a test's way to find
    /// each ready when it is taken).
    public func waitUntilMade() {
        state.wait { s in s.queue.isEmpty && s.making == nil ? () : nil }
    }

    /// Ends the thread and frees the arrays made and not taken.
    public func stop() {
        let unused = state.update { s -> [Key: Made] in
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
        while true {
            let next = state.wait { s -> (Key, @Sendable () -> Made)?? in
                if s.stopped { return .some(nil) }
                guard !s.queue.isEmpty else { return nil }
                let job = s.queue.removeFirst()
                s.making = job.0
                return job
            }
            guard let (key, make) = next else { return }
            var made: Made? = make()
            // Wakes `waitUntilMade` (the thread itself waits for asks only).
            let stopped = state.update { s -> Bool in
                s.making = nil
                // Handed over, not kept: see the type's comment.
                if !s.stopped { s.waiting[key] = made }
                made = nil
                return s.stopped
            }
            if stopped { Memory.returnFreePages() }
        }
    }

    /// An array of `capacity` elements, empty or all `filled`, whose pages
    /// are faulted in: by writing them (a zero into each page of an empty
    /// one's room, the elements into a filled one), one page fault at a time.
    /// Not `MADV_POPULATE_WRITE`: it holds the process's memory map lock for
    /// the whole range, and the replaying thread's own allocations (`mmap`)
    /// waited on it: a 10,000,000-record replay took 1.5 times as long.
    private static func faulted<Element>(capacity: Int, _ filled: Element?) -> [Element] {
        [Element](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            initialized = 0
            guard let base = buffer.baseAddress else { return }
            if let filled {
                buffer.initialize(repeating: filled)
                initialized = capacity
                return
            }
            // Room not yet an element's: raw bytes, which this thread alone holds.
            Memory.touchPages(UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(base),
                                                            count: capacity * MemoryLayout<Element>.stride))
        }
    }
}
