import CacheFetch
import CacheStore
import CacheSystem

/// Streams a download into an `ObjectWriter`, opened at the first byte.
final class ObjectSink: BodySink {
    private struct State: Sendable {
        var writer: ObjectWriter?
        /// What the store refused while streaming (a full disk, too large), if anything.
        var failure: StoreError?
    }
    // The fetch thread writes while the transfer runs, then one worker
    // finishes it; the lock (never contended) orders the two.
    private let state = Locked(State(), rank: .bodySink)
    private let open: @Sendable () throws(StoreError) -> ObjectWriter

    init(open: @escaping @Sendable () throws(StoreError) -> ObjectWriter) { self.open = open }

    func receive(_ bytes: UnsafeRawBufferPointer) throws {
        try state.withLock { (s) throws(StoreError) in
            do throws(StoreError) {
                if s.writer == nil { s.writer = try open() }
                try s.writer?.append(bytes)
            } catch {
                s.failure = error
                throw error
            }
        }
    }

    func reset() throws {
        try state.withLock { (s) throws(StoreError) in
            s.failure = nil
            do throws(StoreError) { try s.writer?.reset() } catch {
                s.failure = error  // the store's failure, not the origin's
                throw error
            }
        }
    }

    /// What the store refused while streaming, if anything.
    var failure: StoreError? { state.withLock { $0.failure } }

    /// The writer holding the whole body (an empty one for an empty body).
    func finishedWriter() throws(StoreError) -> ObjectWriter {
        try state.withLock { (s) throws(StoreError) -> ObjectWriter in
            if let writer = s.writer { return writer }
            let w = try open()
            s.writer = w
            return w
        }
    }

    /// Removes the temp file, if one was opened.
    func discard() { state.withLock { $0.writer?.discard() } }
}
