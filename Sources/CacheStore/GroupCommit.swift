import CacheSystem

/// Group commit: object commits that arrive while one is being logged wait,
/// and the next leader logs all of them as one transaction (one write, one
/// fsync). The first caller with no leader running becomes the leader; the
/// others wait for its result. Each caller returns once its commit is durable.
final class GroupCommit: Sendable {
    /// One object commit waiting for the log.
    struct Pending: Sendable {
        var id: UInt64
        var ref: ObjectRef
        var rows: [(row: Int, url: String)]
        /// What the origin said of the object's freshness, logged for each row mapped.
        var freshness: ImageFreshness?
        /// A 304: the rows keep `ref` (if they still map it) and only their freshness is logged.
        var refreshOnly = false
        /// The digests of the object's chunks, logged with its mapping (nil: one chunk or less).
        var chunks: ChunkDigests? = nil
        /// A variant: `ref` is the variant `spec` of this object (and `rows` is empty).
        var variant: (key: VariantKey, width: Int, height: Int)? = nil
    }

    private struct State {
        var queue: [Pending] = []
        var results: [UInt64: Result<Void, StoreError>] = [:]
        var leading = false
        /// Commits the current leader is writing.
        var leaderBatch = 0
        var nextID: UInt64 = 0
        /// Log transactions written (each may hold many commits).
        var transactions = 0
    }
    private let state = Monitor(State())

    private enum Step { case done(Result<Void, StoreError>), lead([Pending]) }

    /// Queues `ref` and its rows and returns once they are logged: by this
    /// caller, as leader of a batch, through `log`, or by another leader.
    func commit(_ ref: ObjectRef, rows: [(row: Int, url: String)], freshness: ImageFreshness? = nil, refreshOnly: Bool = false,
                chunks: ChunkDigests? = nil, variant: (key: VariantKey, width: Int, height: Int)? = nil,
                log: ([Pending]) throws(StoreError) -> Void) throws(StoreError) {
        // Queued without waking anyone: the waiters wait for a result or for
        // the leader to finish, and this changes neither (with a commit
        // thread per transfer, a wake here was up to 63 threads woken for nothing).
        let id = state.update(wake: .none) { g -> UInt64 in
            g.nextID += 1
            g.queue.append(Pending(id: g.nextID, ref: ref, rows: rows, freshness: freshness, refreshOnly: refreshOnly,
                                   chunks: chunks, variant: variant))
            return g.nextID
        }
        while true {
            let step = state.wait { g -> Step? in
                if let r = g.results.removeValue(forKey: id) { return .done(r) }
                guard !g.leading else { return nil }
                g.leading = true
                let batch = g.queue
                g.queue = []
                g.leaderBatch = batch.count
                return .lead(batch)
            }
            switch step {
            case .done(let result):
                try result.get()
                return
            case .lead(let batch):
                let result = Result { () throws(StoreError) in try log(batch) }
                state.update { g in
                    for c in batch { g.results[c.id] = result }
                    g.leading = false
                    g.leaderBatch = 0
                    g.transactions += 1
                }
            }
        }
    }

    /// Log transactions written for object commits.
    var transactions: Int { state.update(wake: .none) { $0.transactions } }
    /// Commits waiting for the log (queued or taken by the leader).
    var waiting: Int { state.update(wake: .none) { $0.queue.count + $0.leaderBatch } }
}
