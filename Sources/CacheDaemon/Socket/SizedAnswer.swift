import CacheService

/// A listing's answer before it is made (`list_posts`, `list_images`,
/// `/posts`, `/images` built on a worker): the bytes it will take, worked
/// out from its page without writing it, the work that writes it, and the
/// answer that refuses it. The loop grants the bytes (counts them in
/// `max-queued-bytes-total`) before the answer is made, or refuses it when
/// the totals are full, so listings being made count at their size and the
/// bytes held stay within the bound plus one listing (issue 33, point 6).
@_spi(Harness) public struct SizedAnswer: Sendable {
    /// At least the bytes of the answer `make` returns.
    var bytes: Int
    /// Writes the answer: its byte chunks, in order. Runs on a worker.
    @_spi(Harness) public var make: @Sendable () -> [[UInt8]]
    /// The whole answer that refuses it at `limit` (`busy`), on the loop.
    var refuse: @Sendable (LimitReached) -> [UInt8]
}

extension Answering {
    /// Runs a listing's `operation`. A page at hand now (a small one) is
    /// answered now with `respond`, on the loop; a page that comes later, on
    /// a worker, is sized by `sized` and sent to the loop to be granted,
    /// then made on a worker. A failure is answered by `respond` either way.
    static func listing<V>(_ reply: Reply, _ respond: @escaping @Sendable (Result<V, CacheError>) -> Answer,
                           sized: @escaping @Sendable (V) -> SizedAnswer,
                           _ operation: (@escaping Completion<V>) -> Outcome<V>) -> Answer {
        let completion: Completion<V> = { result in
            switch result {
            case .success(let page): reply.finish(sized(page))
            case .failure: reply.finish(respond(result))
            }
        }
        switch operation(completion) {
        case .later: return .later
        case .now(let result): return respond(result)
        }
    }
}

extension Reply {
    /// A listing sized on a worker, for the loop to grant (`EventLoop.grant`).
    func finish(_ sized: SizedAnswer) {
        mailbox.post(Delivery(connection: connection, slot: slot, chunks: [], done: false, sized: sized))
    }

    /// The whole answer as byte chunks, in order (a head and a body, sent
    /// as they are rather than copied into one buffer).
    func finish(chunks: [[UInt8]]) {
        mailbox.post(Delivery(connection: connection, slot: slot, chunks: chunks.map { .bytes($0) }, done: true))
    }
}
