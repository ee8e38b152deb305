/// Listings built on workers, counted at their size (issue 33, point 6): a
/// worker sizes the page (`SizedAnswer`) and the loop grants its bytes before
/// the answer is made. Each grant is counted in `totals` until the answer
/// comes, even when its connection closed meanwhile (the worker still makes
/// it), so what the totals count is what the process holds, and a listing
/// is granted only while they are under `max-queued-bytes-total`: the bytes
/// held reach at most the bound plus one listing.
extension EventLoop {
    /// A connection's request, the key of a granted listing.
    struct SlotKey: Hashable {
        var connection: UInt64
        var slot: UInt64
    }

    /// A listing sized on a worker: granted while the totals have room (its
    /// bytes counted from now, its answer made on a worker through
    /// `submit`), or refused `busy` when they are full. Nil when granted or
    /// its connection is gone; else the delivery that refuses it.
    func grant(_ d: Delivery, _ sized: SizedAnswer) -> Delivery? {
        guard connections[d.connection] != nil else { return nil }  // the client left before it was made
        if totals.full {
            observer.requests(0, errors: 1)
            return Delivery(connection: d.connection, slot: d.slot, chunks: [.bytes(sized.refuse(.queuedAnswers(totals.maxBytes)))], done: true)
        }
        granted[SlotKey(connection: d.connection, slot: d.slot)] = sized.bytes
        totals.grant(sized.bytes)
        let reply = Reply(mailbox: mailbox, connection: d.connection, slot: d.slot, tag: nil)
        submit { reply.finish(chunks: sized.make()) }
        return nil
    }

    /// The answer of a granted listing came (its bytes are counted where
    /// they are queued, or were let go of with its connection): its grant
    /// is no longer counted.
    func settleGrant(_ d: Delivery) {
        guard !granted.isEmpty, let bytes = granted.removeValue(forKey: SlotKey(connection: d.connection, slot: d.slot)) else { return }
        totals.grant(-bytes)
    }
}
