#if canImport(Glibc)
import Glibc
#endif
import Testing
import Dispatch
import CacheSystem

/// The calling thread's name, as the kernel has it.
private func currentThreadName() -> String {
    let fd = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "?" }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 64)
    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    guard n > 0 else { return "?" }
    return String(decoding: buffer[0..<n], as: UTF8.self).trimmingSuffix("\n")
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}

/// Polls `condition` every millisecond for up to `seconds`.
private func eventually(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Clock.monotonicNanoseconds() + UInt64(seconds * 1e9)
    while Clock.monotonicNanoseconds() < deadline {
        if condition() { return true }
        usleep(1000)
    }
    return condition()
}

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
    @Test func aFinishedJobReleasesWhatItCaptured() throws {
        let pool = try WorkerPool(threads: 2, name: "test-pool")
        defer { pool.stop(timeout: .seconds(5)) }
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

    @Test func jobsRunInOrderOnOneThreadAndAllRunBeforeStop() throws {
        let pool = try WorkerPool(threads: 1, name: "test-order")
        let order = Locked<[Int]>([])
        for i in 0..<3000 { pool.submit { order.withLock { $0.append(i) } } }
        #expect(pool.stop(timeout: .seconds(10)))
        #expect(order.withLock { $0 } == Array(0..<3000))
    }

    @Test func everyJobRunsExactlyOnceWhenSubmittedFromManyThreads() throws {
        let pool = try WorkerPool(threads: 4, name: "test-once")
        let perSubmitter = 5000
        let counts = Locked([Int](repeating: 0, count: 4 * perSubmitter))
        let submitted = DispatchSemaphore(value: 0)
        for s in 0..<4 {
            try Threads.start(name: "submitter-\(s)") {
                for i in 0..<perSubmitter {
                    let index = s * perSubmitter + i
                    pool.submit { counts.withLock { $0[index] += 1 } }
                }
                submitted.signal()
            }
        }
        for _ in 0..<4 { #expect(submitted.wait(timeout: .now() + 30) == .success) }
        #expect(pool.stop(timeout: .seconds(30)))
        let final = counts.withLock { $0 }
        #expect(final.allSatisfy { $0 == 1 }, "jobs run other than once: \(final.enumerated().filter { $0.element != 1 }.prefix(5).map(\.offset))")
    }

    @Test func jobsRunConcurrentlyOnThePoolsThreadsUpToItsSize() throws {
        let pool = try WorkerPool(threads: 3, name: "wp-conc")
        struct State {
            var inFlight = 0
            var maxInFlight = 0
            var started = 0
            var threads: Set<String> = []
            var threadIDs: Set<UInt> = []
            var gaveUp = 0
        }
        let state = Locked(State())
        let done = DispatchSemaphore(value: 0)
        let testThread = UInt(pthread_self())
        for _ in 0..<9 {
            pool.submit {
                state.withLock {
                    $0.inFlight += 1
                    $0.started += 1
                    $0.maxInFlight = max($0.maxInFlight, $0.inFlight)
                    $0.threads.insert(currentThreadName())
                    $0.threadIDs.insert(UInt(pthread_self()))
                }
                // The first three only finish once all three are running at once.
                if !eventually(10, { state.withLock { $0.started >= 3 } }) { state.withLock { $0.gaveUp += 1 } }
                usleep(5000)
                state.withLock { $0.inFlight -= 1 }
                done.signal()
            }
        }
        for _ in 0..<9 { #expect(done.wait(timeout: .now() + 30) == .success) }
        #expect(pool.stop(timeout: .seconds(10)))
        let s = state.withLock { $0 }
        #expect(s.gaveUp == 0)
        #expect(s.maxInFlight == 3)
        #expect(s.threads.isSubset(of: ["wp-conc-0", "wp-conc-1", "wp-conc-2"]), "\(s.threads)")
        #expect(s.threadIDs.count == 3)
        #expect(!s.threadIDs.contains(testThread))
    }

    @Test func stopWaitsForQueuedWorkBehindSlowJobs() throws {
        let pool = try WorkerPool(threads: 2, name: "test-drain")
        let ran = Locked(0)
        for _ in 0..<2 { pool.submit { usleep(100_000); ran.withLock { $0 += 1 } } }
        for _ in 0..<50 { pool.submit { ran.withLock { $0 += 1 } } }
        #expect(pool.stop(timeout: .seconds(30)))
        // Everything queued before stop ran before it returned.
        #expect(ran.withLock { $0 } == 52)
    }

    @Test func stopReturnsFalseWhileAJobIsStuckAndTheQueueWaitsBehindIt() throws {
        let pool = try WorkerPool(threads: 1, name: "test-stuck")
        let release = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        let after = Locked(0)
        pool.submit { entered.signal(); release.wait() }
        pool.submit { after.withLock { $0 += 1 } }
        #expect(entered.wait(timeout: .now() + 10) == .success)
        #expect(pool.stop(timeout: .seconds(0.2)) == false)
        #expect(after.withLock { $0 } == 0)
        release.signal()
        // Once unstuck, the queued job still runs and the thread ends.
        #expect(pool.stop(timeout: .seconds(10)))
        #expect(after.withLock { $0 } == 1)
    }

    @Test func anIdlePoolStopsAtOnce() throws {
        let pool = try WorkerPool(threads: 3, name: "test-idle")
        #expect(pool.stop(timeout: .seconds(10)))
        #expect(pool.stop(timeout: .seconds(10)))  // a second stop finds nothing running
    }
}
