import CacheService

/// The one adapter from a service operation's `Outcome` to a front-end's
/// `Answer` (the socket's `Dispatcher`, the HTTP routes): `respond` makes
/// the answer for a result, and is called once, either now (the outcome is
/// at hand: its answer is returned) or when the operation completes (its
/// answer goes out through the `Reply`). `.later` is returned then.
enum Answering {
    /// Runs `operation` with the completion that answers through `reply`.
    static func answer<V>(_ reply: Reply, _ respond: @escaping @Sendable (Result<V, CacheError>) -> Answer,
                          _ operation: (@escaping Completion<V>) -> Outcome<V>) -> Answer {
        switch operation({ reply.finish(respond($0)) }) {
        case .later: return .later
        case .now(let result): return respond(result)
        }
    }

    /// An operation that always completes later (prefetch, verify, gc):
    /// `start` is given the completion that answers through `reply`.
    static func later<V>(_ reply: Reply, _ respond: @escaping @Sendable (Result<V, CacheError>) -> Answer,
                         _ start: (@escaping Completion<V>) -> Void) -> Answer {
        start { reply.finish(respond($0)) }
        return .later
    }
}

extension Reply {
    /// Sends an answer made after its request was read (on a worker): the
    /// one mapping of an `Answer` to a delivery. `.later` sends nothing
    /// (whoever said later finishes it).
    func finish(_ answer: Answer) {
        switch answer {
        case .now(let bytes): finish(bytes)
        case let .nowFile(head, fd, offset, length): finish(header: head, file: fd, offset: offset, size: length)
        case let .nowPassing(line, fds): finish(line, passing: fds)
        case .later: break
        }
    }
}
