import CacheFetch
import CacheStore

/// Streams a download into an `ObjectWriter`, opened at the first byte.
final class ObjectSink: BodySink, @unchecked Sendable {
    // Safe without a lock: used by the fetch thread only while the transfer
    // runs, then by the one worker that runs the completion (the handoff
    // goes through the HTTP client's and the pool's locks, which order the
    // accesses); never by two threads at once.
    private let open: () throws(StoreError) -> ObjectWriter
    private var writer: ObjectWriter?
    /// What the store refused while streaming (a full disk, too large), if anything.
    private(set) var failure: StoreError?

    init(open: @escaping () throws(StoreError) -> ObjectWriter) { self.open = open }

    func receive(_ bytes: UnsafeRawBufferPointer) throws {
        do throws(StoreError) {
            if writer == nil { writer = try open() }
            try writer?.append(bytes)
        } catch {
            failure = error
            throw error
        }
    }

    func reset() throws {
        failure = nil
        try writer?.reset()
    }

    /// The writer holding the whole body (an empty one for an empty body).
    func finishedWriter() throws(StoreError) -> ObjectWriter {
        if let writer { return writer }
        let w = try open()
        writer = w
        return w
    }

    /// Removes the temp file, if one was opened.
    func discard() { writer?.discard() }
}
