import Foundation

/// A fixed set of threads for blocking work (fsync, hashing, directory walks),
/// kept off the event loop and off Swift's cooperative pool.
public final class WorkerPool: Sendable {
    private struct Queue {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var stopping = false
    }
    private let queue = Locked(Queue())
    private let condition = NSCondition()
    private let threads: Int

    /// Starts `threads` worker threads named `name-N`.
    public init(threads: Int, name: String) {
        self.threads = threads
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

    /// Lets the threads finish queued work and exit.
    public func stop() {
        condition.lock()
        queue.withLock { $0.stopping = true }
        condition.broadcast()
        condition.unlock()
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
                if stop { condition.unlock(); return }
                condition.wait()
            }
            condition.unlock()
            job?()
        }
    }
}
