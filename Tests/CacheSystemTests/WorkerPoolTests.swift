import Testing
import Dispatch
import CacheSystem

/// Something a job captures, that says when it is freed.
private final class Payload: Sendable {
    let freed: DispatchSemaphore
    let bytes: [UInt8]
    init(freed: DispatchSemaphore, size: Int) {
        self.freed = freed
        bytes = [UInt8](repeating: 1, count: size)
    }
    deinit { freed.signal() }
}

@Suite struct WorkerPoolTests {
    @Test func aFinishedJobReleasesWhatItCaptured() {
        let pool = WorkerPool(threads: 2, name: "test-pool")
        defer { pool.stop(timeout: 5) }
        // Fewer than the 1,024 jobs after which the queue used to be trimmed:
        // each payload must go as soon as its job has run, not 1,024 jobs later.
        let freed = DispatchSemaphore(value: 0)
        let ran = DispatchSemaphore(value: 0)
        for _ in 0..<15 {
            let payload = Payload(freed: freed, size: 1 << 20)
            pool.submit { _ = payload.bytes.count; ran.signal() }
        }
        for _ in 0..<15 { #expect(ran.wait(timeout: .now() + 10) == .success) }
        for i in 0..<15 { #expect(freed.wait(timeout: .now() + 10) == .success, "payload \(i) is still held by the pool") }
    }

    @Test func jobsRunInOrderOnOneThreadAndAllRunBeforeStop() {
        let pool = WorkerPool(threads: 1, name: "test-order")
        let order = Locked<[Int]>([])
        for i in 0..<3000 { pool.submit { order.withLock { $0.append(i) } } }
        #expect(pool.stop(timeout: 10))
        #expect(order.withLock { $0 } == Array(0..<3000))
    }
}
