import CacheProtocol

/// Why a call failed: the daemon's error code (docs/protocol.md, "Errors"),
/// or why it could not be asked.
public struct CachedError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The daemon's code, then the client's own.
    public enum Code: Sendable, Hashable, CustomStringConvertible {
        /// One of the protocol's codes (`ErrorCode`, the one list of them:
        /// `.daemon(.notFound)`), from the daemon's answer, or the client's
        /// word for what the daemon would say (`.daemon(.notCached)` for a
        /// row without a hash).
        case daemon(ErrorCode)
        /// The daemon could not be reached, or the connection broke before
        /// the answer came (a request in flight may or may not have run).
        case unavailable
        /// The daemon did not answer within the timeout.
        case timedOut
        /// The daemon answered something this client cannot read.
        case malformed
        /// The task waiting for the answer was cancelled.
        case cancelled
        /// A listing read page by page (`postPages`, `imagePages`, cachectl's
        /// `get posts` and `get images`) changed between two of its pages (a
        /// refresh or a delete in between): what was read may miss or
        /// repeat entries. Reading it again gives the listing as it is now.
        case changed

        /// The code's name: the protocol's as it is sent (`not_found`), or
        /// the client's own (`timedOut`).
        public var name: String {
            switch self {
            case .daemon(let code): code.rawValue
            case .unavailable: "unavailable"
            case .timedOut: "timedOut"
            case .malformed: "malformed"
            case .cancelled: "cancelled"
            case .changed: "changed"
            }
        }

        public var description: String { name }
    }

    public var code: Code
    public var message: String
    /// Nothing listened on the socket, the daemon did not answer in time, or
    /// it closed the connection before answering (a daemon stopping):
    /// cachectl's exit status 3, as opposed to a transport that broke otherwise.
    package var isNotRunning = false

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) (\(code.name))" }

    package init(_ e: ClientError) {
        switch e {
        case .timedOut: self.init(.timedOut, e.description)
        case .malformed: self.init(.malformed, e.description)
        default: self.init(.unavailable, e.description)
        }
        switch e {
        case .notRunning, .timedOut, .closed: isNotRunning = true
        default: break
        }
    }

    /// The error of an `{"ok":false,...}` answer, or nil for an ok one. Only
    /// the protocol's codes (`ErrorCode`) are taken from the daemon: any
    /// other, the client's own among them, is `.daemon(.internal)`.
    package init?(answer: JSON) {
        guard answer["ok"]?.bool != true else { return nil }
        let wire = answer["error"]?["code"]?.string.flatMap(ErrorCode.init(rawValue:)) ?? .internal
        self.init(.daemon(wire), answer["error"]?["message"]?.string ?? "the daemon answered without a reason")
    }
}
