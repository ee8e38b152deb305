/// A fixed set of threads for blocking work (fsync, hashing, directory walks),
/// kept off the event loop and off Swift's cooperative pool.
public final class WorkerPool: Sendable {
    private struct Queue {
        /// Jobs in submission order from `head`; a taken job's slot is
        /// cleared at once, so a finished job (and what it captured, such as
        /// a feed body) is released as soon as it has run.
        var jobs: [(@Sendable () -> Void)?] = []
        var head = 0
        var stopping = false
        var running = 0
    }
    private let queue = Locked(Queue())
    private let mutex = PosixMutex()
    private let condition = PosixCondition()

    /// Starts `threads` worker threads named `name-N`.
    public init(threads: Int, name: String) {
        queue.withLock { $0.running = threads }
        for i in 0..<threads {
            Threads.start(name: "\(name)-\(i)") { [self] in self.run() }
        }
    }

    /// Queues `job`; it runs on one of the pool's threads.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        mutex.lock()
        queue.withLock { $0.jobs.append(job) }
        condition.signal()
        mutex.unlock()
    }

    /// Lets the threads finish queued work and exit; waits up to `timeout`
    /// seconds for them. Returns false if some were still busy then.
    @discardableResult
    public func stop(timeout: Double) -> Bool {
        mutex.lock()
        queue.withLock { $0.stopping = true }
        condition.broadcast()
        let deadline = Clock.monotonicNanoseconds() + UInt64(timeout * 1e9)
        while queue.withLock({ $0.running }) > 0 {
            let now = Clock.monotonicNanoseconds()
            if now >= deadline { break }
            _ = condition.wait(mutex, seconds: Double(deadline - now) / 1e9)
        }
        let done = queue.withLock { $0.running } == 0
        mutex.unlock()
        return done
    }

    private func run() {
        while true {
            mutex.lock()
            var job: (@Sendable () -> Void)?
            while true {
                let (next, stop) = queue.withLock { q -> ((@Sendable () -> Void)?, Bool) in
                    if q.head < q.jobs.count {
                        let j = q.jobs[q.head]
                        q.jobs[q.head] = nil
                        q.head += 1
                        if q.head == q.jobs.count {
                            q.jobs.removeAll(keepingCapacity: true)
                            q.head = 0
                        } else if q.head > 1024 && q.head * 2 > q.jobs.count {
                            // Empty slots only: dropping them frees the array's space.
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
                    mutex.unlock()
                    return
                }
                condition.wait(mutex)
            }
            mutex.unlock()
            job?()
        }
    }
}
