#if canImport(Glibc)
import Glibc
#endif
import CacheHTTP
import CacheProtocol
import CacheSystem

/// One client connection. Lives on the loop thread only.
final class Connection {
    let id: UInt64
    let fd: FileDescriptor
    /// The input, framed as the listener that accepted it says.
    let input: ConnectionInput
    /// Accepted on a TCP listener.
    let tcp: Bool
    /// Chunks ready to send, in order (the first partly sent: `readyOffset`
    /// counts its bytes gone). Small byte chunks are coalesced.
    var ready: [OutputChunk] = []
    var readyOffset: Int64 = 0
    /// What `ready` counts against `max-queued-bytes`: its bytes, its files'
    /// sizes and `descriptorCost` per descriptor to pass.
    var queuedBytes = 0
    /// The bytes of the byte chunks in `ready` and in `slots` (counted as
    /// they enter the connection, wherever they wait, until a chunk is sent
    /// whole and let go of): memory, counted in `totals` and against
    /// `max-queued-bytes`.
    var heldBytes = 0 { didSet { totals.bytes += heldBytes - oldValue; totals.check() } }
    /// Descriptors held in `ready` and `slots` (files to send, descriptors
    /// to pass), counted in `totals`.
    var descriptors = 0 { didSet { totals.descriptors += descriptors - oldValue; totals.check() } }
    /// True while anything is queued or awaited for this connection.
    var holdsAnswers: Bool { heldBytes > 0 || descriptors > 0 || !slots.isEmpty }
    /// What all connections hold together (EventLoop+Limits.swift).
    let totals: OutputTotals
    /// Answers not yet complete, in request order; the first one's parts go straight to `ready`.
    var slots: [(id: UInt64, chunks: [OutputChunk], done: Bool)] = []
    var nextSlot: UInt64 = 0
    var readClosed = false
    var closeAfterFlush = false
    /// The epoll events asked for, once `registered` with the loop's epoll.
    var interest: UInt32 = 0
    var registered = false
    /// Set once the connection was given a bigger send buffer for file bytes.
    var bigSendBuffer = false
    /// Set while the connection waits in the loop's flush queue.
    var flushQueued = false
    /// The slot of an answer whose size is known only once it is made
    /// (a listing built on a worker, the descriptors of an `open` of many
    /// objects; on an HTTP connection, any answer that comes later):
    /// reading the connection waits for it.
    var unsizedAnswer: UInt64?
    /// When bytes last moved either way (monotonic ns), for the idle timeout.
    var lastActivity = Clock.monotonicNanoseconds()
    /// When it was accepted (monotonic ns).
    let opened = Clock.monotonicNanoseconds()

    init(id: UInt64, fd: FileDescriptor, totals: OutputTotals, framing: Framing = .jsonLines, tcp: Bool = false) {
        self.id = id
        self.totals = totals
        self.fd = fd
        self.tcp = tcp
        switch framing {
        case .jsonLines: input = .jsonLines(LineInput())
        case .http: input = .http(HTTPConnectionInput(requestSince: opened))
        }
    }

    var framing: Framing {
        if case .http = input { return .http }
        return .jsonLines
    }

    /// The HTTP input, on an HTTP connection.
    var httpInput: HTTPConnectionInput? {
        if case .http(let h) = input { return h }
        return nil
    }

    func enqueue(_ chunk: OutputChunk) {
        switch chunk {
        case .bytes(let b):
            queuedBytes += b.count
            if b.count <= Connection.coalesceAnswer, case .bytes(var last)? = ready.last, last.count <= Connection.coalesceLimit {
                // Coalesce small answers, one send for many: taken out, the
                // last chunk's array is the only reference and grows in place.
                ready.removeLast()
                last.append(contentsOf: b)
                ready.append(.bytes(last))
            } else {
                ready.append(.bytes(b))
            }
        case .file(let fd, let offset, let size):
            queuedBytes += Int(size)
            ready.append(.file(fd, offset: offset, size: size))
        case .descriptors(let fds):
            // Never coalesced: the bytes after them start a chunk of their own.
            queuedBytes += Connection.descriptorCost * fds.count
            ready.append(.descriptors(fds))
        }
    }

    /// What a descriptor waiting to be passed counts against
    /// `max-queued-bytes`: a client that never reads can make the daemon
    /// hold at most `max-queued-bytes` / 64 KiB of them (64 at the default),
    /// plus those of its unanswered requests (`maxPipeline`).
    static let descriptorCost = 65536

    /// Answers up to 4 KiB are appended to the last queued chunk while it
    /// is under 64 KiB: many small answers go out in one `send`.
    static let coalesceAnswer = 4096
    static let coalesceLimit = 65536

    /// Lets go of everything queued (the connection is closing): its
    /// descriptors are closed and the totals no longer count them.
    func releaseAll() {
        for chunk in ready { chunk.release() }
        for s in slots { for chunk in s.chunks { chunk.release() } }
        ready = []
        slots = []
        heldBytes = 0
        descriptors = 0
        queuedBytes = 0
    }
}

/// A connection's input as its framing reads it: each framing's state
/// exists only on connections of that framing. The payloads are classes so
/// that the loop appends to a buffer in place (a value taken out of the
/// enum and put back would copy it).
enum ConnectionInput {
    /// JSON lines (docs/protocol.md).
    case jsonLines(LineInput)
    /// HTTP/1.1 (docs/http.md).
    case http(HTTPConnectionInput)

    /// Takes bytes received.
    func append(_ bytes: UnsafeRawBufferPointer) {
        switch self {
        case .jsonLines(let l): l.buffer.append(bytes)
        case .http(let h): h.buffer.append(bytes)
        }
    }
}

/// A JSON-lines connection's input: the bytes of lines not yet handled.
final class LineInput {
    var buffer = LineBuffer()
}

/// An HTTP connection's input: the bytes of heads not yet parsed, the bytes
/// of a request body still to skip, and when the request now arriving began
/// to (monotonic ns; nil between requests).
final class HTTPConnectionInput {
    var buffer = HTTPInput()
    var bodyToSkip = 0
    var requestSince: UInt64?

    /// `requestSince`: an accepted connection's request timeout runs from
    /// the accept (a client that connects and sends nothing is slowloris).
    init(requestSince: UInt64?) { self.requestSince = requestSince }

    /// Part of a request (or of its body) has come.
    var holdsPartialRequest: Bool { buffer.count > 0 || bodyToSkip > 0 }
}

extension Sequence<OutputChunk> {
    /// How many descriptors the chunks hold.
    var descriptorCount: Int {
        reduce(0) { n, chunk in n + chunk.descriptorCount }
    }
}
