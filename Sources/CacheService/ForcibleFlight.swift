import CacheSystem

/// One refresh of a feed at a time, where a refresh may be forced (every
/// page asked without validators: `prefetch --force`). A caller joins a
/// running refresh that does at least what it asks: any caller joins a
/// forced one, an unforced caller an unforced one. A forced caller that
/// finds an unforced refresh running is queued: when that one ends it asks
/// again, and runs (or joins) a forced one. So a force is never answered by
/// a refresh that sent validators (the newcomer's try: `prefetch --force`
/// during a prefetch got the running one's 304s and exited 0). The queued
/// go first: until one of them has started the forced refresh, an unforced
/// caller waits for it rather than start another unforced one ahead of them,
/// so a stream of unforced refreshes cannot keep a force waiting.
final class ForcibleFlight<Value: Sendable>: Sendable {
    typealias Waiter = @Sendable (Value) -> Void

    private struct State {
        var running = false
        var forced = false
        var waiters: [Waiter] = []
        /// Forced callers to ask again once the running, unforced, refresh ends.
        var queued: [@Sendable () -> Void] = []
        /// Forced callers the last refresh's end is asking again: until the
        /// first of them starts a refresh, only a forced caller may start one.
        var reserved = 0
        /// Unforced callers that came meanwhile: waiters of that forced refresh.
        var early: [Waiter] = []
    }
    private let state = Locked(State())

    /// What `join` made of the caller.
    enum Joined: Equatable {
        /// Nothing was running: the caller runs the refresh, then calls `finish`.
        case run
        /// `waiter` gets the running refresh's result.
        case joined
        /// A forced caller behind an unforced refresh: `again` is called when it ends.
        case queued
    }

    /// Joins the running refresh, or starts one, or (forced, behind an
    /// unforced one) queues `again`.
    func join(force: Bool, waiter: @escaping Waiter, again: @escaping @Sendable () -> Void) -> Joined {
        state.withLock { s in
            if force && s.reserved > 0 { s.reserved -= 1 }
            guard s.running else {
                if !force && (s.reserved > 0 || !s.early.isEmpty) {
                    s.early.append(waiter)
                    return .joined
                }
                s = State(running: true, forced: force, waiters: [waiter] + s.early, reserved: s.reserved)
                return .run
            }
            if force && !s.forced {
                s.queued.append(again)
                return .queued
            }
            s.waiters.append(waiter)
            return .joined
        }
    }

    /// Ends the running refresh: its waiters get `value` (in the order they
    /// joined), then the queued forced callers ask again.
    func finish(_ value: Value) {
        let (waiters, queued) = state.withLock { s in
            defer { s = State(reserved: s.queued.count) }
            return (s.waiters, s.queued)
        }
        for w in waiters { w(value) }
        for q in queued { q() }
    }
}
