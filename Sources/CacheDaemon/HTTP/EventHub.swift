import CacheHTTP
import CacheProtocol
import CacheService
import CacheSystem

/// `/events`: the service's events as server-sent events (docs/http.md,
/// "Events") to every connection that asked. Each event is framed once and
/// posted as a droppable delivery to each subscriber, which the mailbox
/// coalesces or drops before it queues it (Mailbox.swift): a client that
/// does not read loses events (never more than `max-queued-bytes` waits for
/// it), and the page re-reads `/images` when a prefetch ends, so nothing
/// stays missing.
@_spi(Harness) public final class EventHub: Sendable {
    private struct Subscriber {
        var reply: Reply
        /// HTTP/1.1: chunked; HTTP/1.0: the body ends when the connection does.
        var chunked: Bool
    }

    private let subscribers = Locked<[UInt64: Subscriber]>([:])
    private let ticks = Locked(0)
    private let responses: HTTPResponses

    /// Seconds between comments on an idle stream, which keep proxies from
    /// closing it and find clients that went away.
    static let keepAliveSeconds = 15

    init(responses: HTTPResponses) {
        self.responses = responses
    }

    /// Starts a stream on `reply`'s connection; it lasts until the connection closes.
    func subscribe(_ request: HTTPRequest, _ reply: Reply) -> Answer {
        var asked = request
        if request.minorVersion == 0 { asked.keepAlive = false }  // no framing: the stream ends with the connection
        var h = responses.head(.ok, asked)
        h.field("Content-Type", "text/event-stream")
        h.field("Cache-Control", "no-cache")
        h.field("X-Accel-Buffering", "no")  // nginx in front: pass each event at once
        let chunked = request.minorVersion >= 1
        if chunked { h.field("Transfer-Encoding", "chunked") }
        if request.method == .head { return .now(h.finish()) }
        reply.send(h.finish() + Self.frame(Array("retry: 2000\n\n".utf8), chunked: chunked), droppable: false)
        subscribers.withLock { $0[reply.connection] = Subscriber(reply: reply, chunked: chunked) }
        return .later
    }

    func unsubscribe(connection id: UInt64) {
        subscribers.withLock { _ = $0.removeValue(forKey: id) }
    }

    /// Sends `event` to every subscriber (from any thread).
    @_spi(Harness) public func publish(_ event: ServiceEvent) {
        switch event {
        case .progress(let p):
            var o = JSONObjectWriter()
            o.field("phase", p.phase)
            o.field("done", p.done)
            o.field("total", p.total)
            o.field("bytes", p.bytes)
            send(name: "progress", data: o.finished())
        case let .rowsCached(rows, object):
            for row in rows {
                var o = JSONObjectWriter()
                o.field("row", row)
                o.field("hash", object.hash.hex)
                o.field("size", object.size)
                o.field("type", object.mimeType)
                send(name: "row", data: o.finished())
            }
        case .prefetchFinished(let succeeded):
            // Never dropped: it is what tells a page to read `/images` again.
            send(name: "done", data: Array("{\"ok\":\(succeeded)}".utf8), droppable: false)
        }
    }

    /// Once a second: a comment on every stream each `keepAliveSeconds`.
    func tick() {
        let due = ticks.withLock { t -> Bool in
            t += 1
            if t >= Self.keepAliveSeconds { t = 0; return true }
            return false
        }
        if due { broadcast(Array(": keep-alive\n\n".utf8)) }
    }

    private func send(name: String, data: [UInt8], droppable: Bool = true) {
        broadcast(Array("event: \(name)\ndata: ".utf8) + data + Array("\n\n".utf8), droppable: droppable)
    }

    private func broadcast(_ event: [UInt8], droppable: Bool = true) {
        let all = subscribers.withLock { Array($0.values) }
        guard !all.isEmpty else { return }
        let chunked = Self.frame(event, chunked: true)
        for s in all { s.reply.send(s.chunked ? chunked : event, droppable: droppable) }
    }

    /// `bytes` as one chunk of a chunked body, or as they are.
    static func frame(_ bytes: [UInt8], chunked: Bool) -> [UInt8] {
        guard chunked else { return bytes }
        return Array(String(bytes.count, radix: 16).utf8) + [0x0D, 0x0A] + bytes + [0x0D, 0x0A]
    }
}
