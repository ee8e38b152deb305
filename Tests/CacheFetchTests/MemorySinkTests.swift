import CacheFetch
import Testing

/// The feed documents' sink: chunks joined in order, the limit counted over
/// all of them, `reset` and `take` leaving it empty.
@Suite struct MemorySinkTests {
    /// Chunks of every size around the sink's own (1 MiB) and its first
    /// (16 KiB), as libcurl hands them (up to 16 KiB, or a whole small body).
    @Test func joinsChunksOfAnySizeInOrder() throws {
        var rng = SystemRandomNumberGenerator()
        let body = (0..<(3 << 20) + 12_345).map { _ in UInt8.random(in: 0...255, using: &rng) }
        for sizes in [[1], [16 << 10], [(16 << 10) + 1], [1 << 20], [(1 << 20) + 7], [body.count], [3, 70_000, 1 << 20, 5]] {
            let sink = MemorySink(limit: body.count)
            var at = 0
            var k = 0
            while at < body.count {
                let n = min(sizes[k % sizes.count], body.count - at)
                try body[at..<at + n].withUnsafeBytes { try sink.receive($0) }
                at += n
                k += 1
            }
            #expect(sink.bytes == body, "\(sizes)")
            #expect(sink.take() == body, "\(sizes)")
            #expect(sink.take().isEmpty)
        }
    }

    @Test func refusesPastItsLimitAndForgetsOnReset() throws {
        let sink = MemorySink(limit: 100, setting: "feed-max-size")
        try [UInt8](repeating: 1, count: 60).withUnsafeBytes { try sink.receive($0) }
        #expect(throws: BodyTooLarge.self) { try [UInt8](repeating: 2, count: 41).withUnsafeBytes { try sink.receive($0) } }
        do {
            try [UInt8](repeating: 2, count: 41).withUnsafeBytes { try sink.receive($0) }
        } catch let error as BodyTooLarge {
            #expect(error.description.contains("feed-max-size"))
        }
        sink.reset()
        #expect(sink.bytes.isEmpty)
        try [UInt8](repeating: 3, count: 100).withUnsafeBytes { try sink.receive($0) }
        #expect(sink.take() == [UInt8](repeating: 3, count: 100))
    }
}
