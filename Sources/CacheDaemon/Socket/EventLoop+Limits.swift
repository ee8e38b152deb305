#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheProtocol
import CacheSystem

/// What every connection's queued answers hold together: the bytes of
/// answers in memory (and those granted to listings being built, at their
/// size: EventLoop+Listings.swift) and the descriptors waiting to be sent
/// or passed. Owned by the loop thread; each
/// `Connection` adds and removes its own.
///
/// At a bound (`full`) the connections that hold answers stop being read
/// and a listing is refused `busy` (when it is asked, and when its size is
/// known, before it is built), while a connection holding nothing may still send any other
/// request: a new client, a client's liveness `ping` on a second
/// connection, is answered. `full` ends at three quarters of the bound, so
/// reading does not flap on and off around it.
final class OutputTotals {
    /// Bytes of `.bytes` chunks queued on all connections, and granted to listings being built.
    var bytes = 0
    /// Descriptors (files to send, descriptors to pass) held for all connections.
    var descriptors = 0

    var maxBytes: Int
    var maxDescriptors: Int
    private(set) var full = false
    /// Set when `full` ends: the loop resumes the connections it paused.
    var resumeDue = false

    init(maxBytes: Int, maxDescriptors: Int) {
        self.maxBytes = maxBytes
        self.maxDescriptors = maxDescriptors
    }

    /// Updates the states after a change of either total.
    func check() {
        if bytes >= maxBytes || descriptors >= maxDescriptors { full = true }
        if full && hasRoom {
            full = false
            resumeDue = true
        }
    }

    /// Counts `bytes` more (less, when negative) granted to listings being built.
    func grant(_ bytes: Int) {
        self.bytes += bytes
        check()
    }

    /// At most three quarters of each bound: where reading resumes and shedding stops.
    var hasRoom: Bool { bytes <= maxBytes / 4 * 3 && descriptors <= maxDescriptors / 4 * 3 }

    /// Whether a connection that holds answers waits.
    func pauses(holdingAnswers: Bool) -> Bool {
        full && holdingAnswers
    }
}

/// The loop's defences of what the whole process has (issue 22): the
/// descriptor limit at `accept`, and memory and descriptors held by
/// answers queued for clients that do not read them.
extension EventLoop {
    /// A connection stalled this long while the totals are full may be shed.
    static let stalled = Duration.seconds(1)

    /// The most queued descriptors per connection and in total, from the
    /// process's real limit on open files: a quarter of it for answers (at
    /// least 32), the rest for connections, the store and curl.
    static func descriptorBudget() -> (perConnection: Int, total: Int) {
        let total = max(32, openFileLimit() / 4)
        return (min(64, max(8, total / 8)), total)
    }

    /// `accept` failed with `error`. Out of descriptors (`EMFILE`,
    /// `ENFILE`): the spare descriptor is given up to take the waiting
    /// connection and tell it `busy`, and the listener is paused until the
    /// next tick, so a level-triggered listener cannot spin the loop.
    func acceptFailed(_ listener: Int, _ error: SystemError) {
        if let held = logThrottle.admit("accept") {
            log.warning("accept failed: \(error)\(LogThrottle.suffix(held))")
        }
        guard error.errno == EMFILE || error.errno == ENFILE else { return }
        if spareDescriptor >= 0 {
            Glibc.close(spareDescriptor)
            spareDescriptor = -1
            // No connection to take (it went, or the limit is hit again): nothing to refuse.
            if let fd = try? UnixSocket.accept(listeners[listener].fd) {
                refuseBusy(fd, listeners[listener], .descriptors(EventLoop.openFileLimit()))
            }
            spareDescriptor = EventLoop.openSpare()
        }
        pauseListener(listener)
    }

    /// The soft `RLIMIT_NOFILE` (1024 if it cannot be read).
    static func openFileLimit() -> Int {
        var limit = rlimit()
        return getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Int(min(limit.rlim_cur, 1 << 24)) : 1024
    }

    /// A descriptor kept open to be closed when the process runs out.
    static func openSpare() -> Int32 {
        open("/dev/null", OpenFlags.readOnly.rawValue | O_CLOEXEC)
    }

    private func pauseListener(_ i: Int) {
        guard !pausedListeners.contains(i) else { return }
        pausedListeners.insert(i)
        // Not paused, a level-triggered listener wakes the loop each turn
        // until the tick: busy, not stuck; said, and resumed all the same.
        if clinux_epoll_mod(epfd, listeners[i].fd.rawValue, 0, EventLoop.listenerBase + UInt64(i)) != 0 {
            listenerWatchFailed(i, SystemError("epoll_ctl(EPOLL_CTL_MOD)"), "pause")
        }
    }

    /// Once a tick: paused listeners listen again. One that cannot stays
    /// paused and is tried again at the next tick (a listener never left deaf).
    func resumeListeners() {
        for i in pausedListeners {
            if clinux_epoll_mod(epfd, listeners[i].fd.rawValue, EPOLLIN.rawValue, EventLoop.listenerBase + UInt64(i)) == 0 {
                pausedListeners.remove(i)
            } else {
                listenerWatchFailed(i, SystemError("epoll_ctl(EPOLL_CTL_MOD)"), "resume")
            }
        }
    }

    private func listenerWatchFailed(_ i: Int, _ error: SystemError, _ what: String) {
        if let held = logThrottle.admit("epoll-listener") {
            log.error("cannot \(what) listener \(i)'s events (\(listeners[i].framing), descriptor \(listeners[i].fd.rawValue)): \(error)\(what == "resume" ? "; tried again at the next tick" : "")\(LogThrottle.suffix(held))")
        }
    }

    /// Once the totals are below their bounds again, the connections read
    /// again: first those that hold nothing (new and well-behaved clients),
    /// then the rest, which would otherwise take the room again first.
    func resumeConnections() {
        guard totals.resumeDue else { return }
        totals.resumeDue = false
        let all = Array(connections.values)
        for c in all where !c.holdsAnswers { process(c); queueFlush(c) }
        for c in all where c.holdsAnswers { process(c); queueFlush(c) }
    }

    /// Once a tick while the totals are full: closes the connections that
    /// hold the most output and have sent none of what is ready for a second
    /// (clients that stopped reading), until the totals are under three
    /// quarters of their bounds. Connections that read keep their answers,
    /// and one only waiting for its answer (a long prefetch, an event
    /// stream with nothing queued) is not stalled.
    func shedStalled(_ now: UInt64) {
        guard totals.full else { return }
        let stalled = connections.values
            .filter { !$0.ready.isEmpty && Clock.elapsed(since: $0.lastActivity, now: now) >= EventLoop.stalled }
            .sorted { $0.heldBytes + $0.descriptors * Connection.descriptorCost > $1.heldBytes + $1.descriptors * Connection.descriptorCost }
        var shed = 0, bytes = 0, descriptors = 0
        for c in stalled {
            guard !totals.hasRoom else { break }
            shed += 1
            bytes += c.heldBytes
            descriptors += c.descriptors
            close(c)
        }
        if shed > 0, let held = logThrottle.admit("shed") {
            log.warning("closed \(shed) connections that stopped reading, holding \(bytes) bytes and \(descriptors) descriptors of answers (max-queued-bytes-total \(totals.maxBytes), \(totals.maxDescriptors) queued descriptors at most)\(LogThrottle.suffix(held))")
        }
    }

    /// HTTP is at `http-max-connections` and one more arrives: the oldest
    /// connection that has not completed a request in its first second is
    /// closed to make room (1,024 connections that never send a byte locked
    /// HTTP out for `idle-timeout`; a real client sends its request at once).
    func evictSilentHTTP() {
        let now = Clock.monotonicNanoseconds()
        var oldest: Connection?
        for c in connections.values where c.framing == .http && c.nextSlot == 0 && Clock.elapsed(since: c.opened, now: now) >= EventLoop.stalled {
            if oldest == nil || c.opened < oldest!.opened { oldest = c }
        }
        guard let oldest else { return }
        if let held = logThrottle.admit("evict") {
            log.info("HTTP connections at http-max-connections \(limits.maxHTTPConnections): closing connection \(oldest.id), open for \(Clock.elapsed(since: oldest.opened, now: now).millisecondsRoundedUp) ms without a request\(LogThrottle.suffix(held))")
        }
        close(oldest)
    }
}

extension Command {
    /// `list_posts` or `list_images`: an answer whose size is known only once it is built.
    var isListing: Bool {
        switch self {
        case .listPosts, .listImages: true
        default: false
        }
    }

    /// An answer that, while it is made on a worker, may hold more than
    /// the per-connection bounds allow for one request: a listing (its
    /// bytes) or an `open` of many objects (up to 64 descriptors). Reading
    /// the connection waits until it comes, so a client has at most one
    /// such answer being made at a time.
    var holdsReadingWhileMade: Bool {
        switch self {
        case .listPosts, .listImages, .openMany: true
        default: false
        }
    }
}
