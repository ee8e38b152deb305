import CacheFetch
import CacheStore
import CacheSystem

/// Streams a download into an `ObjectWriter`, opened at the first byte,
/// checking the store's free space (`min-free-space`) at the first byte and
/// then every `ObjectSink.headroomInterval` bytes.
final class ObjectSink: BodySink {
    private struct State: Sendable {
        var writer: ObjectWriter?
        /// Bytes received since the free space was last checked (nil: never checked).
        var unchecked: Int?
        /// What the store refused while streaming (a full disk, too large), if anything.
        var failure: StoreError?
    }
    // The fetch thread writes while the transfer runs, then one commit
    // thread (or a worker, for a failure) finishes it; the lock (never contended) orders the two.
    private let state = Locked(State(), rank: .bodySink)
    private let open: @Sendable () throws(StoreError) -> ObjectWriter
    private let headroom: @Sendable (_ needed: Int64) throws(StoreError) -> Void

    /// `headroom` throws when the store is under `min-free-space`, or would be
    /// after `needed` more bytes (the transfer then stops, and its temp file
    /// is removed at the end).
    init(headroom: @escaping @Sendable (_ needed: Int64) throws(StoreError) -> Void = { _ in },
         open: @escaping @Sendable () throws(StoreError) -> ObjectWriter) {
        self.headroom = headroom
        self.open = open
    }

    /// Free space is checked once per this many bytes of a download: a
    /// `statvfs` per chunk would be a round trip per 16 KiB on a FUSE or
    /// network file system, and a few concurrent downloads may then pass
    /// the headroom by at most this much each.
    static let headroomInterval = 256 << 10

    func receive(_ bytes: UnsafeRawBufferPointer) throws {
        try state.withLock { (s) throws(StoreError) in
            do throws(StoreError) {
                if s.unchecked.map({ $0 >= Self.headroomInterval }) ?? true {
                    try headroom(0)
                    s.unchecked = 0
                }
                s.unchecked? += bytes.count
                if s.writer == nil { s.writer = try open() }
                try s.writer?.append(bytes)
            } catch {
                s.failure = error
                throw error
            }
        }
    }

    /// A body whose announced length would take the free space under the
    /// headroom is refused before its first byte is written.
    func expect(length: Int64) throws {
        do throws(StoreError) { try headroom(length) } catch {
            state.withLock { $0.failure = error }
            throw error
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
