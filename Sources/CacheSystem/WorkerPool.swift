import Foundation

/// A fixed set of threads for blocking work (fsync, hashing, directory walks),
/// kept off the event loop and off Swift's cooperative pool.
public final class WorkerPool: Sendable {
    private struct Queue {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var stopping = false
        var running = 0
    }
    private let queue = Locked(Queue())
    private let condition = NSCondition()
    private let threads: Int

    /// Starts `threads` worker threads named `name-N`.
    public init(threads: Int, name: String) {
        self.threads = threads
        queue.withLock { $0.running = threads }
        for i in 0..<threads {
            let thread = Thread { [self] in self.run() }
            thread.name = "\(name)-\(i)"
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Queues `job`; it runs on one of the pool's threads.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        queue.withLock { $0.jobs.append(job) }
        condition.signal()
        condition.unlock()
    }

    /// Lets the threads finish queued work and exit; waits up to `timeout`
    /// seconds for them. Returns false if some were still busy then.
    @discardableResult
    public func stop(timeout: Double) -> Bool {
        condition.lock()
        queue.withLock { $0.stopping = true }
        condition.broadcast()
        let deadline = Date().addingTimeInterval(timeout)
        while queue.withLock({ $0.running }) > 0 {
            if !condition.wait(until: deadline) { break }
        }
        let done = queue.withLock { $0.running } == 0
        condition.unlock()
        return done
    }

    private func run() {
        while true {
            condition.lock()
            var job: (@Sendable () -> Void)?
            while true {
                let (next, stop) = queue.withLock { q -> ((@Sendable () -> Void)?, Bool) in
                    if q.head < q.jobs.count {
                        let j = q.jobs[q.head]
                        q.head += 1
                        if q.head > 1024 && q.head * 2 > q.jobs.count {
                            q.jobs.removeFirst(q.head)
                            q.head = 0
                        }
                        return (j, false)
                    }
                    return (nil, q.stopping)
                }
                if let next { job = next; break }
                if stop {
                    queue.withLock { $0.running -= 1 }
                    condition.broadcast()
                    condition.unlock()
                    return
                }
                condition.wait()
            }
            condition.unlock()
            job?()
        }
    }
}
