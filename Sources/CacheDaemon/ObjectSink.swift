import CacheFetch
import CacheStore

/// Streams a download into an `ObjectWriter`, opened at the first byte.
final class ObjectSink: BodySink, @unchecked Sendable {
    // Used by the fetch thread only while the transfer runs, then by the one
    // worker that runs the completion: never by two threads at once.
    private let open: () throws(StoreError) -> ObjectWriter
    private var writer: ObjectWriter?

    init(open: @escaping () throws(StoreError) -> ObjectWriter) { self.open = open }

    func receive(_ bytes: UnsafeRawBufferPointer) throws {
        if writer == nil { writer = try open() }
        try writer?.append(bytes)
    }

    func reset() throws { try writer?.reset() }

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
