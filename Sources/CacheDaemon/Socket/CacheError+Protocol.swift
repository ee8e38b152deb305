import CacheProtocol
import CacheService

/// The one place where failures become the protocol's error codes
/// (docs/protocol.md, "Errors").
extension ProtocolError {
    /// The answer for a service failure: a store failure is `internal`,
    /// never `upstream`; `upstream` is the origin's, and a feed URL that is
    /// not configured (docs/protocol.md, "Error codes by operation").
    init(_ error: CacheError) {
        self.init(Self.code(error), error.description)
    }

    static func code(_ error: CacheError) -> ErrorCode {
        switch error {
        case .origin, .notConfigured: return .upstream
        case .store: return .internal
        case .notFound: return .notFound
        case .notCached: return .notCached
        case .invalid: return .badRequest
        case .busy: return .busy
        case .unavailable: return .internal
        case .several(let all):
            return error.isStoreFailure ? .internal : all.first.map(code) ?? .internal
        case .partialPrefetch(_, let failure): return code(failure)
        }
    }

    /// The answer for a front-end limit that was reached.
    init(_ limit: LimitReached) {
        switch limit {
        case .connections(let max):
            self.init(.busy, "too many connections (\(max)); try again later")
        case .requestLine(let max):
            self.init(.tooLarge, "request line longer than \(max) bytes; closing the connection")
        case .queuedAnswers(let max):
            self.init(.busy, "\(max) bytes of answers wait for clients that do not read them (max-queued-bytes-total); "
                      + "a listing is not started now: try again later")
        case .descriptors(let limit):
            self.init(.busy, "out of file descriptors (RLIMIT_NOFILE \(limit)); try again later")
        }
    }
}

/// A limit of the socket front-end (docs/protocol.md, "Limits"), naming its value.
enum LimitReached: Error, Sendable {
    /// `max-connections` connections are open.
    case connections(Int)
    /// A request line is longer than the protocol allows.
    case requestLine(Int)
    /// All connections together hold `max-queued-bytes-total` (or their
    /// share of descriptors): a listing would add an answer of unknown size.
    case queuedAnswers(Int)
    /// `accept` found no descriptor left under this limit.
    case descriptors(Int)
}
