#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheHTTP
import CacheProtocol
import CacheSystem

/// The single thread that owns the listening sockets and every connection.
final class EventLoop {
    let epfd: Int32
    let listeners: [Listener]
    private let signalFD: Int32
    let mailbox: Mailbox
    var connections: [UInt64: Connection] = [:]
    /// How many of `connections` are HTTP ones.
    private var httpConnections = 0
    /// Connections with answers made in this turn, sent once its events are handled.
    private var flushQueue: [Connection] = []
    private var nextID: UInt64 = 100
    /// Changed only on the loop thread (SIGHUP reloads run there).
    var limits: LoopLimits {
        didSet {
            assertOnLoopThread()
            totals.maxBytes = limits.maxQueuedBytesTotal
            totals.check()
        }
    }
    /// What all connections' queued answers hold (EventLoop+Limits.swift).
    let totals: OutputTotals
    /// Queued descriptors one connection may hold before its reading pauses.
    let descriptorsPerConnection: Int
    /// Closed to accept (and refuse) a connection when descriptors run out.
    var spareDescriptor: Int32
    /// Listeners paused until the next tick after running out of descriptors.
    var pausedListeners = Set<Int>()
    var logThrottle = LogThrottle()
    /// Bytes of answers let go of since the heap was last trimmed.
    var freedBytes = 0
    /// Droppable deliveries the mailbox dropped (progress, `/events`).
    var droppedEvents = 0
    /// The bytes granted to each listing being built, until its answer
    /// comes (counted in `totals`: EventLoop+Listings.swift).
    var granted: [SlotKey: Int] = [:]
    /// The thread running `run`: connections, limits and the scratch buffer
    /// are its alone (checked in debug builds).
    private var owner: pthread_t?
    let log: Logger
    let observer: LoopObserver
    private var scratch = [UInt8](repeating: 0, count: EventLoop.readSize)
    private var stopping = false

    /// Handles one parsed request.
    var handler: (Request, Reply) -> Answer = { _, _ in .now([]) }
    /// Handles the requests of HTTP connections (EventLoop+HTTP.swift).
    var http: HTTPHandling?
    /// Called for SIGHUP.
    var onReload: () -> Void = {}
    /// Runs a granted listing's work on a worker (the service's pool);
    /// inline, on the loop, unless set.
    var submit: (@escaping @Sendable () -> Void) -> Void = { $0() }
    /// Called about once a second from the loop (the watchdog's heartbeat:
    /// it proves the loop itself still turns).
    var onTick: () -> Void = {}
    /// Called on the loop thread when sending a file failed reading it (a
    /// media error from `sendfile`: `SystemError.isMediaError`), with the
    /// file's path and identity, before the connection is closed.
    var onFileReadError: (String, FileIdentity?, SystemError) -> Void = { _, _, _ in }

    /// One read takes up to 64 KiB: a whole pipelined burst of requests
    /// in one call, and the buffer is allocated once.
    static let readSize = 65536
    /// Events taken per `epoll_wait`; more wait for the next turn.
    static let eventsPerWait = 256
    /// The loop wakes at least once a second: idle timeouts and the
    /// watchdog's heartbeat are checked per tick.
    static let tick = Duration.seconds(1)
    /// Reads from one connection per turn before the others get theirs:
    /// 16 x 64 KiB is enough for any client, and one cannot starve the rest.
    static let readsPerTurn = 16
    /// A connection that is sent a file gets a 2 MiB send buffer: fewer,
    /// larger writes and fewer wakeups of both sides.
    static let fileSendBuffer: Int32 = 2 << 20
    /// The most one `sendfile` call is asked for (the kernel sends at most
    /// about 2 GiB per call anyway).
    static let maxSendfile: Int64 = 1 << 30

    private static let mailboxKey: UInt64 = 1
    private static let signalKey: UInt64 = 2
    static let listenerBase: UInt64 = 10

    init(listeners: [Listener], signalFD: Int32, limits: LoopLimits, log: Logger, observer: LoopObserver) throws(SystemError) {
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epfd >= 0 else { throw SystemError("epoll_create1") }
        self.listeners = listeners
        self.signalFD = signalFD
        self.limits = limits
        self.log = log
        self.observer = observer
        let budget = EventLoop.descriptorBudget()
        totals = OutputTotals(maxBytes: limits.maxQueuedBytesTotal, maxDescriptors: budget.total)
        descriptorsPerConnection = budget.perConnection
        spareDescriptor = EventLoop.openSpare()
        mailbox = try Mailbox()
        try add(mailbox.eventFD, EPOLLIN.rawValue, EventLoop.mailboxKey)
        if signalFD >= 0 { try add(signalFD, EPOLLIN.rawValue, EventLoop.signalKey) }
        for (i, l) in listeners.enumerated() { try add(l.fd.rawValue, EPOLLIN.rawValue, EventLoop.listenerBase + UInt64(i)) }
    }

    deinit {
        Glibc.close(epfd)
        if spareDescriptor >= 0 { Glibc.close(spareDescriptor) }
    }

    private func add(_ fd: Int32, _ events: UInt32, _ key: UInt64) throws(SystemError) {
        guard clinux_epoll_add(epfd, fd, events, key) == 0 else { throw SystemError("epoll_ctl") }
    }

    /// Traps (debug builds) when called off the loop thread once it runs.
    @inline(__always) func assertOnLoopThread() {
        #if DEBUG
        if let owner { precondition(pthread_equal(owner, pthread_self()) != 0, "event loop state touched off the loop thread") }
        #endif
    }

    /// Runs until SIGTERM or SIGINT, on the calling thread.
    func run() {
        owner = pthread_self()
        NonBlockingThread.markCurrent()
        var events = [UInt32](repeating: 0, count: EventLoop.eventsPerWait)
        var keys = [UInt64](repeating: 0, count: EventLoop.eventsPerWait)
        var lastSweep = Clock.monotonicNanoseconds()
        while !stopping {
            let now = Clock.monotonicNanoseconds()
            if Clock.elapsed(since: lastSweep, now: now) >= EventLoop.tick {
                if limits.idle > .zero { closeIdle(now) }
                if limits.httpRequest > .zero { timeOutRequests(now) }
                resumeListeners()
                if spareDescriptor < 0 { spareDescriptor = EventLoop.openSpare() }
                shedStalled(now)
                if freedBytes >= Memory.largeBody {
                    Memory.returnFreePages()
                    freedBytes = 0
                }
                onTick()
                lastSweep = now
            }
            let n = clinux_epoll_wait(epfd, &events, &keys, Int32(EventLoop.eventsPerWait), EventLoop.tick.millisecondsRoundedUp)
            if n < 0 {
                if errno == EINTR { continue }
                log.error("epoll_wait failed: \(SystemError("epoll_wait"))")
                return
            }
            for i in 0..<Int(n) {
                let key = keys[i]
                switch key {
                case EventLoop.mailboxKey:
                    let (deliveries, dropped) = mailbox.drain()
                    droppedEvents += dropped
                    for d in deliveries { deliver(d) }
                case EventLoop.signalKey:
                    handleSignals()
                case EventLoop.listenerBase..<EventLoop.listenerBase + UInt64(listeners.count):
                    acceptAll(Int(key - EventLoop.listenerBase))
                default:
                    guard let c = connections[key] else { continue }
                    let ev = events[i]
                    if ev & EPOLLOUT.rawValue != 0 {
                        flush(c)
                        guard connections[key] != nil else { continue }  // closed: its descriptor number may be reused already
                    }
                    // An HTTP client that hung up while its answer was
                    // awaited (an event stream, a listing) is gone, as
                    // nginx takes it (499): its connection and what it
                    // holds are let go of now, not at the next write.
                    if ev & EPOLLRDHUP.rawValue != 0 && c.framing == .http && isPaused(c) && !c.closeAfterFlush { close(c); continue }
                    if ev & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue) != 0 {
                        readFrom(c)
                    }
                    // Both directions are gone: nobody is left to answer.
                    if ev & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { close(c) }
                }
            }
            flushQueued()
            if totals.resumeDue {
                resumeConnections()
                flushQueued()
            }
        }
        for c in Array(connections.values) { close(c) }
    }

    /// Closes connections silent for longer than the idle timeout with no
    /// answer pending (a client waiting for a long prefetch is not idle),
    /// or with output it has not read for that long (an event stream, a
    /// large answer: the client stopped reading).
    private func closeIdle(_ now: UInt64) {
        for c in Array(connections.values) where (c.slots.isEmpty || !c.ready.isEmpty) && Clock.elapsed(since: c.lastActivity, now: now) > limits.idle {
            log.debug("closing connection \(c.id): idle for more than \(limits.idle.secondsText) s")
            close(c)
        }
    }

    private func handleSignals() {
        while true {
            let sig = clinux_signalfd_read(signalFD)
            if sig == 0 { return }
            if sig == SIGHUP { onReload() }
            else {
                log.notice("received signal \(sig), stopping")
                stopping = true
            }
        }
    }

    private func acceptAll(_ index: Int) {
        assertOnLoopThread()
        let listener = listeners[index]
        while true {
            let accepted: FileDescriptor?
            do { accepted = try UnixSocket.accept(listener.fd) } catch {
                acceptFailed(index, error)
                return
            }
            guard let fd = accepted else { return }
            if listener.framing == .http && httpConnections >= limits.maxHTTPConnections { evictSilentHTTP() }
            let httpFull = listener.framing == .http && httpConnections >= limits.maxHTTPConnections
            if connections.count >= limits.maxConnections || httpFull {
                refuseBusy(fd, listener, .connections(httpFull ? limits.maxHTTPConnections : limits.maxConnections))
                continue
            }
            if listener.tcp { _ = clinux_tcp_nodelay(fd.rawValue) }
            let id = nextID
            nextID += 1
            let c = Connection(id: id, fd: fd, totals: totals, framing: listener.framing, tcp: listener.tcp)
            connections[id] = c
            if c.framing == .http { httpConnections += 1 }
            observer.connection(opened: true)
            if let cred = UnixSocket.peerCredentials(fd) {
                log.debug("connection \(id) from pid \(cred.pid) uid \(cred.uid) gid \(cred.gid)")
            }
            updateInterest(c)
        }
    }

    /// Tells a connection over `limit` `busy` in its listener's framing,
    /// without waiting, and closes it.
    func refuseBusy(_ fd: FileDescriptor, _ listener: Listener, _ limit: LimitReached) {
        let line = listener.framing == .http && http != nil ? http!.busy(limit) : Response.error(ProtocolError(limit), tag: nil)
        // Best effort, never waiting: a client that cannot take one line is closed all the same.
        _ = line.withUnsafeBytes { try? UnixSocket.send(fd, $0) }
        fd.close()
    }

    private func readFrom(_ c: Connection) {
        assertOnLoopThread()
        var rounds = 0
        while !c.readClosed && !c.closeAfterFlush && !isPaused(c) && rounds < EventLoop.readsPerTurn {
            rounds += 1
            let n: Int?
            do {
                n = try scratch.withMutableBytes { (raw) throws(SystemError) in try UnixSocket.receive(c.fd, into: raw) }
            } catch {
                close(c)
                return
            }
            guard let n else { break }
            if n == 0 { c.readClosed = true; break }
            c.lastActivity = Clock.monotonicNanoseconds()
            scratch.withUnsafeBytes { raw in
                let bytes = UnsafeRawBufferPointer(rebasing: raw[0..<n])
                c.input.append(bytes)
            }
            process(c)
            // A short read drained the socket: epoll will say when more comes.
            if n < scratch.count { break }
        }
        process(c)
        queueFlush(c)
    }

    /// Handles the complete requests buffered on `c`, as its framing says.
    func process(_ c: Connection) {
        switch c.input {
        case .jsonLines(let input): processLines(c, input)
        case .http(let input): processHTTP(c, input)
        }
    }

    /// Answers made while handling one `epoll_wait`'s events are sent after
    /// all of them were handled, as Redis does before it sleeps: a client
    /// woken by its answer does not preempt the loop in the middle of the
    /// batch, and every connection still gets one `send` per turn.
    func queueFlush(_ c: Connection) {
        guard !c.flushQueued else { return }
        c.flushQueued = true
        flushQueue.append(c)
    }

    private func flushQueued() {
        // `flush` never queues, so the queue cannot grow while it drains.
        for c in flushQueue {
            c.flushQueued = false
            flush(c)
        }
        flushQueue.removeAll(keepingCapacity: true)
    }

    /// Reading stops while the pipeline or the output is full, and while a
    /// listing built on a worker is pending: its size is known only once its
    /// page is, so a client cannot have many of them (each possibly
    /// hundreds of MB) held for it at once, past `maxQueuedBytes`.
    func isPaused(_ c: Connection) -> Bool {
        c.slots.count >= limits.maxPipeline || c.queuedBytes >= limits.maxQueuedBytes || c.heldBytes >= limits.maxQueuedBytes
            || c.unsizedAnswer != nil
            || c.descriptors >= descriptorsPerConnection || totals.pauses(holdingAnswers: c.holdsAnswers)
    }

    private func processLines(_ c: Connection, _ input: LineInput) {
        assertOnLoopThread()
        var requests = 0, errors = 0
        defer {
            if requests > 0 { observer.requests(requests, errors: errors) }
        }
        while !c.closeAfterFlush && !isPaused(c) {
            switch input.buffer.nextLine() {
            case .incomplete:
                return
            case .tooLong:
                errors += 1
                requests += 1
                c.answerNow(Response.error(ProtocolError(LimitReached.requestLine(maxRequestLine)), tag: nil))
                c.closeAfterFlush = true
                return
            case .line(let line):
                let slot = c.nextSlot
                c.nextSlot += 1
                switch Request.parse(line, maxDepth: limits.maxJSONDepth) {
                case .failure(let e):
                    requests += 1
                    errors += 1
                    c.answerNow(Response.error(e.error, tag: e.tag))
                case .success(let request):
                    requests += 1
                    if totals.full && request.command.isListing {
                        errors += 1
                        c.answerNow(Response.error(ProtocolError(LimitReached.queuedAnswers(totals.maxBytes)), tag: request.tag))
                        continue
                    }
                    let reply = Reply(mailbox: mailbox, connection: c.id, slot: slot, tag: request.tag)
                    if c.answer(handler(request, reply), slot: slot), request.command.holdsReadingWhileMade { c.unsizedAnswer = slot }
                }
            }
        }
    }

    private func deliver(_ delivery: Delivery) {
        assertOnLoopThread()
        var d = delivery
        if let sized = d.sized {
            guard let refusal = grant(d, sized) else { return }  // granted: its answer comes later
            d = refusal
        }
        guard let c = connections[d.connection] else {
            for chunk in d.chunks { chunk.release() }  // the client left
            settleGrant(d)
            return
        }
        c.deliver(d, maxQueuedBytes: limits.maxQueuedBytes)
        settleGrant(d)
        if d.done && c.unsizedAnswer == d.slot { c.unsizedAnswer = nil }
        process(c)  // reading may have paused on a full pipeline or a pending listing
        queueFlush(c)
    }

    func close(_ c: Connection) {
        assertOnLoopThread()
        guard connections.removeValue(forKey: c.id) != nil else { return }
        if c.framing == .http {
            httpConnections -= 1
            http?.closed(connection: c.id)
        }
        _ = clinux_epoll_del(epfd, c.fd.rawValue)
        c.fd.close()
        freedBytes += c.heldBytes
        c.releaseAll()
        observer.connection(opened: false)
    }
}
