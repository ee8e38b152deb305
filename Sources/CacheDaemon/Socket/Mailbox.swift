#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheProtocol
import CacheSystem

/// A piece of a response that is ready to go out.
@_spi(Harness) public enum OutputChunk: Sendable {
    case bytes([UInt8])
    /// `size` bytes of an open file from `offset`, sent with `sendfile`; the loop closes it.
    case file(FileDescriptor, offset: Int64 = 0, size: Int64)
    /// Descriptors (1 to `UnixSocket.maxPassedDescriptors`) passed to the
    /// client (SCM_RIGHTS) together with the first byte of the `.bytes`
    /// chunk that follows; the loop closes its own copies.
    case descriptors([FileDescriptor])

    /// Closes the descriptors the chunk holds (a chunk that will not be sent).
    @_spi(Harness) public func release() {
        switch self {
        case .bytes: break
        case .file(let fd, _, _): fd.close()
        case .descriptors(let fds): for fd in fds { fd.close() }
        }
    }

    /// The descriptors this chunk holds (a file to send is one).
    var descriptorCount: Int {
        switch self {
        case .bytes: 0
        case .file: 1
        case .descriptors(let fds): fds.count
        }
    }
}

/// A response part posted from another thread to the loop.
@_spi(Harness) public struct Delivery: Sendable {
    /// The connection and the answer's slot in it (answers leave in slot order).
    @_spi(Harness) public var connection: UInt64
    @_spi(Harness) public var slot: UInt64
    /// What goes out, in order.
    @_spi(Harness) public var chunks: [OutputChunk]
    /// The last delivery of its answer.
    @_spi(Harness) public var done: Bool
    /// A progress event: dropped rather than queued when the client already
    /// has `maxQueuedBytes` waiting (each event carries the totals so far,
    /// so a later one replaces what a dropped one said).
    var droppable = false
    /// A listing sized on a worker, waiting for the loop to grant its bytes
    /// (`EventLoop.grant`); `chunks` is empty then.
    @_spi(Harness) public var sized: SizedAnswer? = nil
}

/// Where worker and fetch threads post deliveries; wakes the loop through an eventfd.
///
/// Droppable deliveries (progress lines, `/events`) are bounded before they
/// are queued, not after: those for one answer that the loop has not taken
/// yet are coalesced into one delivery of at most `maxCoalescedBytes`, and
/// all of them together hold at most `maxDroppableBytes`; beyond either,
/// they are dropped here and counted (each progress event carries the totals
/// so far, and an event stream's reader re-reads what it missed). So 1,000
/// subscribers of a 20,000-row prefetch cost at most the bound, not one
/// delivery per subscriber per event (issue 22: 2.5 GB before).
@_spi(Harness) public final class Mailbox: Sendable {
    private struct Queue {
        var items: [Delivery] = []
        /// Where the droppable delivery still open to coalescing of each
        /// answer is in `items`, and the bytes it holds.
        var open: [AnswerKey: (index: Int, bytes: Int)] = [:]
        var droppableBytes = 0
        var dropped = 0
    }

    private struct AnswerKey: Hashable {
        var connection: UInt64
        var slot: UInt64
    }

    private let queue = Locked(Queue())
    let eventFD: Int32

    /// The most bytes of one answer's droppable deliveries waiting for the loop.
    static let maxCoalescedBytes = 64 << 10
    /// The most bytes of all droppable deliveries waiting for the loop.
    static let maxDroppableBytes = 16 << 20
    /// A queue drained with more room than this gives it back.
    static let keptCapacity = 4096

    /// A mailbox with its eventfd (which the loop watches).
    @_spi(Harness) public init() throws(SystemError) {
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard fd >= 0 else { throw SystemError("eventfd") }
        eventFD = fd
    }

    deinit { Glibc.close(eventFD) }

    func post(_ d: Delivery) {
        let wasEmpty = queue.withLock { q -> Bool? in
            let key = AnswerKey(connection: d.connection, slot: d.slot)
            guard d.droppable else {
                if !q.open.isEmpty { q.open[key] = nil }  // what follows must not be merged ahead of this
                q.items.append(d)
                return q.items.count == 1
            }
            let size = d.byteCount
            guard q.droppableBytes + size <= Mailbox.maxDroppableBytes else { q.dropped += 1; return nil }
            if let (i, held) = q.open[key] {
                guard held + size <= Mailbox.maxCoalescedBytes else { q.dropped += 1; return nil }
                q.items[i].chunks.append(contentsOf: d.chunks)
                q.open[key] = (i, held + size)
            } else {
                q.open[key] = (q.items.count, size)
                q.items.append(d)
            }
            q.droppableBytes += size
            return q.items.count == 1
        }
        if wasEmpty == true {
            var one: UInt64 = 1
            _ = Glibc.write(eventFD, &one, 8)
        }
    }

    /// Everything posted since the last drain, in order, and how many
    /// droppable deliveries were dropped meanwhile.
    @_spi(Harness) public func drain() -> (deliveries: [Delivery], dropped: Int) {
        var counter: UInt64 = 0
        _ = Glibc.read(eventFD, &counter, 8)
        return queue.withLock { q in
            let out = (q.items, q.dropped)
            let keep = q.items.count <= Mailbox.keptCapacity
            q.items.removeAll(keepingCapacity: keep)
            q.open.removeAll(keepingCapacity: keep)
            q.droppableBytes = 0
            q.dropped = 0
            return out
        }
    }
}

extension Delivery {
    /// The bytes of its byte chunks.
    var byteCount: Int {
        chunks.reduce(0) { n, chunk in
            if case .bytes(let b) = chunk { return n + b.count }
            return n
        }
    }
}

/// The way a handler answers a request later, from any thread.
@_spi(Harness) public struct Reply: Sendable {
    let mailbox: Mailbox
    @_spi(Harness) public let connection: UInt64
    @_spi(Harness) public let slot: UInt64
    /// The request's tag, to echo.
    let tag: [UInt8]?

    /// The way to answer the request in `slot` of `connection` later, echoing `tag`.
    @_spi(Harness) public init(mailbox: Mailbox, connection: UInt64, slot: UInt64, tag: [UInt8]?) {
        self.mailbox = mailbox
        self.connection = connection
        self.slot = slot
        self.tag = tag
    }

    /// An intermediate line (a progress event); skipped for a client that
    /// is not reading what it was already sent, unless not `droppable`.
    func send(_ line: [UInt8], droppable: Bool = true) {
        mailbox.post(Delivery(connection: connection, slot: slot, chunks: [.bytes(line)], done: false, droppable: droppable))
    }

    /// The final line of the answer.
    func finish(_ line: [UInt8]) {
        mailbox.post(Delivery(connection: connection, slot: slot, chunks: [.bytes(line)], done: true))
    }

    /// A header followed by `size` bytes of a file from `offset`.
    func finish(header: [UInt8], file: FileDescriptor, offset: Int64 = 0, size: Int64) {
        mailbox.post(Delivery(connection: connection, slot: slot, chunks: [.bytes(header), .file(file, offset: offset, size: size)], done: true))
    }

    /// An answer whose file, if it has one, is not sent after all (HEAD,
    /// 304): the descriptor is closed here.
    func finish(_ head: [UInt8], closing descriptor: FileDescriptor?) {
        descriptor?.close()
        finish(head)
    }

    /// The final line, with `descriptors` (at least one) passed to the
    /// client along with its first byte.
    func finish(_ line: [UInt8], passing descriptors: [FileDescriptor]) {
        mailbox.post(Delivery(connection: connection, slot: slot, chunks: [.descriptors(descriptors), .bytes(line)], done: true))
    }
}

/// What a handler does with a request.
@_spi(Harness) public enum Answer {
    /// The whole answer, now.
    case now([UInt8])
    /// A header and `length` bytes of a file from `offset`, now.
    case nowFile([UInt8], FileDescriptor, offset: Int64 = 0, length: Int64)
    /// The whole answer line, now, with descriptors (at least one) passed
    /// along with it.
    case nowPassing([UInt8], [FileDescriptor])
    /// The handler keeps the `Reply` and answers later.
    case later
}
