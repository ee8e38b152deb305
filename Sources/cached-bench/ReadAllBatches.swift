#if canImport(Glibc)
import Glibc
#endif
import CacheProtocol
import CacheSystem

/// `read-all --mode open --batch N`: every object through `open` of many
/// objects, N hashes a request (docs/protocol.md, "open of many objects").
extension ReadAllBenchmark {
    /// `open` with `hashes` of `batch` objects at a time, `window` requests
    /// in flight (so the daemon opens the next batch while this one is
    /// read); each descriptor read into a 128 KiB buffer and closed, as
    /// `runOpen` reads one.
    static func runOpenBatches(socket: String, rounds: Int, batch: Int, window: Int) throws {
        let hashes = try objects(socket: socket).map(\.hash)
        let client = try Client(socketPath: socket)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 128 << 10, alignment: 4096)
        defer { buffer.deallocate() }
        let order = (0..<rounds).flatMap { _ in hashes }
        let batches = stride(from: 0, to: order.count, by: batch).map { Array(order[$0..<min($0 + batch, order.count)]) }
        var next = 0
        func sendRequest() throws {
            try client.send(Request.line(op: "open", [("hashes", .array(batches[next].map { .string($0) }))]))
            next += 1
        }
        var bytes = 0
        let start = Clock.monotonicNanoseconds()
        while next < min(window, batches.count) { try sendRequest() }
        for asked in batches {
            let answer = try client.readOpenManyAnswer(hashes: asked)
            guard case .objects(let objects, _) = answer else {
                throw SystemError("open", String(decoding: answer.answer.encoded, as: UTF8.self))
            }
            if next < batches.count { try sendRequest() }
            for object in objects {
                guard case let .file(fd, size) = object else { throw SystemError("open", "\(object)") }
                let n = try drain(fd, buffer)
                fd.close()
                guard n == Int(size) else { throw SystemError("read", "\(n) bytes of an object of \(size)") }
                bytes += n
            }
        }
        report(objects: order.count, bytes: bytes, since: start)
    }
}
