import CacheHTTP
import CacheSystem

/// Limits of the event loop (from the settings: `Settings.loopLimits`).
struct LoopLimits: Sendable, Equatable {
    /// Connections served at once; one more gets `busy` and is closed.
    var maxConnections: Int
    /// Output bytes (file payloads included) queued on a connection before the
    /// loop stops reading from it.
    var maxQueuedBytes: Int
    /// Silence, with nothing pending or with output the client does not
    /// read, before a connection is closed; 0: never.
    var idle: Duration
    /// Deepest JSON nesting accepted in a request.
    var maxJSONDepth: Int
    /// Bytes of answers queued on all connections together before every
    /// connection's reading pauses and those that stopped reading are shed.
    var maxQueuedBytesTotal = 256 << 20
    /// Requests a connection may have unanswered before the loop stops
    /// reading from it: deep enough for any pipelining client, small enough
    /// that one connection cannot queue unbounded work.
    var maxPipeline = 256
    /// HTTP connections served at once, of `maxConnections`: HTTP clients
    /// cannot take every connection from the JSON-lines socket's.
    var maxHTTPConnections = 1024
    /// How long an HTTP request head (and its body) may take to arrive; 0: no limit.
    var httpRequest = Duration.seconds(30)
}

/// What the loop reports: requests and connections, for the counters.
protocol LoopObserver: Sendable {
    /// `count` requests were parsed, `errors` of them answered with an error by the loop itself.
    func requests(_ count: Int, errors: Int)
    func connection(opened: Bool)
}

/// How a listener's connections frame their requests.
enum Framing: Sendable, Equatable {
    /// JSON lines (docs/protocol.md).
    case jsonLines
    /// HTTP/1.1 (docs/http.md).
    case http
}

/// A listening socket and the framing of the connections it accepts.
struct Listener {
    var fd: FileDescriptor
    var framing: Framing
    /// TCP: accepted connections get TCP_NODELAY (an answer's head and its
    /// file go out in separate sends; Nagle would hold the second back).
    var tcp = false
}

/// What the loop needs of the HTTP front-end (`HTTPFrontEnd`).
protocol HTTPHandling: AnyObject {
    var limits: HTTPLimits { get }
    /// Handles one parsed request, as `EventLoop.handler` does a JSON line
    /// (the `Host` is checked on every listener: `HTTPHostPolicy`).
    func handle(_ request: HTTPRequest, _ reply: Reply) -> Answer
    /// False when the connection closes after the answer to `request`.
    func keepsAlive(_ request: HTTPRequest) -> Bool
    /// `100 Continue`, for a client that waits for it before its body.
    var continueHead: [UInt8] { get }
    /// The whole answer to a request that did not arrive in time.
    func timedOut() -> [UInt8]
    /// The whole answer to a head that was refused.
    func rejected(_ rejection: HTTPRejection) -> [UInt8]
    /// The whole answer to a request or connection over `limit` (503).
    func busy(_ limit: LimitReached) -> [UInt8]
    /// Connection `id` closed (an event stream it held ends).
    func closed(connection id: UInt64)
}
