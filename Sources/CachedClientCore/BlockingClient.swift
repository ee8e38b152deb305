import CacheProtocol
import CacheSystem

/// The same connection code as `CachedClient`, waited on by the calling
/// thread: cachectl's, one call per process. Without `async` in this
/// module, cachectl does not link or start Swift's concurrency runtime,
/// whose start-up cost a one-shot command more than its call (measured:
/// 1.96 against 1.70 ms per `cachectl ping` with it linked, 7 ms when a
/// task ran). The caller's thread reads the answer itself.
package final class BlockingClient: Sendable {
    package let socketPath: String
    private let pipeline: Pipeline
    /// Every call is quick: the daemon answers it at once, so its whole
    /// answer must come within the timeout, however it trickles.
    private let quick: Bool

    package init(socketPath: String, timeout: ClientTimeout, quick: Bool, checkingDirectory: Bool = true, requiringOwner: Bool = false) {
        self.socketPath = socketPath
        self.quick = quick
        pipeline = Pipeline(socketPath: socketPath, timeout: timeout, checkingDirectory: checkingDirectory, requiringOwner: requiringOwner)
    }

    /// The answer as it came, an error answer included.
    package func answer(_ op: String, _ fields: [(String, JSON)] = []) throws(CachedError) -> JSON {
        try call(Request.line(op: op, fields), .line).json
    }

    /// `open` of `hash`: the object's file and size, or the error answer.
    package func open(hash: String) throws(CachedError) -> Client.OpenAnswer {
        guard case let .descriptor(open) = try call(Request.line(op: "open", [("hash", .string(hash))]), .descriptor) else {
            throw CachedError(.malformed, "an open answer of another shape")
        }
        return open
    }

    /// `open` of `hashes`, in requests of at most `Request.maxOpenObjects`
    /// (one after the other): each object's outcome, in the order given.
    /// A request the daemon refuses whole (a malformed hash: `bad_request`)
    /// throws, after closing what the requests before it opened.
    package func open(hashes: [String]) throws(CachedError) -> [Client.OpenedObject] {
        var out: [Client.OpenedObject] = []
        out.reserveCapacity(hashes.count)
        do throws(CachedError) {
            for batch in OpenBatches.split(hashes) {
                let answer = try call(Request.line(op: "open", [("hashes", .array(batch.map { .string($0) }))]), .descriptors(hashes: batch))
                out += try OpenBatches.objects(of: answer)
            }
        } catch {
            for o in out { o.close() }
            throw error
        }
        return out
    }

    /// `read` of `hash`: the header line, and the bytes with an ok one.
    package func read(hash: String) throws(CachedError) -> (JSON, [UInt8]) {
        switch try call(Request.line(op: "read", [("hash", .string(hash))]), .bytes) {
        case let .bytes(json, bytes): return (json, bytes)
        case let other: return (other.json, [])
        }
    }

    /// `prefetch`: `progress` gets each event line; the answer line is returned.
    package func prefetch(_ fields: [(String, JSON)], progress: @escaping @Sendable (JSON) -> Void) throws(CachedError) -> JSON {
        try call(Request.line(op: "prefetch", fields), .events, onEvent: progress).json
    }

    private func call(_ line: [UInt8], _ shape: AnswerShape, onEvent: @escaping @Sendable (JSON) -> Void = { _ in }) throws(CachedError) -> WireAnswer {
        let result = Monitor<Result<WireAnswer, CachedError>?>(nil)
        pipeline.submit(line, Waiter(shape, quick: quick, onEvent: onEvent) { r in result.update { $0 = r } }, inline: true)
        return try result.wait { $0 }.get()
    }
}
