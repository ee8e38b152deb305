/// A fixed set of threads for blocking work (fsync, hashing, directory walks),
/// kept off the event loop and off Swift's cooperative pool.
public final class WorkerPool: Sendable {
    public typealias Job = @Sendable () -> Void

    private struct Queue {
        /// Jobs in submission order from `head`; a taken job's slot is
        /// cleared at once, so a finished job (and what it captured, such as
        /// a feed body) is released as soon as it has run.
        var jobs: [Job?] = []
        var head = 0
        var stopping = false
        var running = 0

        /// The next job, compacting the array as it empties.
        mutating func take() -> Job? {
            guard head < jobs.count else { return nil }
            let j = jobs[head]
            jobs[head] = nil
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head > Queue.compactAfter && head * 2 > jobs.count {
                // Empty slots only: dropping them frees the array's space.
                jobs.removeFirst(head)
                head = 0
            }
            return j
        }

        /// Taken slots kept at the front before the array is compacted: a
        /// long queue is not shifted on every take.
        static let compactAfter = 1024
    }
    private let queue = Monitor(Queue())

    /// Starts `threads` worker threads named `name-N`; throws when not one
    /// could be created (with some, the pool runs on those it has).
    public init(threads: Int, name: String) throws(SystemError) {
        var failure: SystemError?
        for i in 0..<threads {
            queue.update { $0.running += 1 }
            do throws(SystemError) { try Threads.start(name: "\(name)-\(i)") { [self] in self.run() } } catch {
                queue.update { $0.running -= 1 }
                failure = error
            }
        }
        if let failure, queue.update({ $0.running }) == 0 { throw failure }
    }

    /// Worker threads running.
    public var threads: Int { queue.update { $0.running } }

    /// Queues `job`; it runs on one of the pool's threads.
    public func submit(_ job: @escaping Job) {
        queue.update(wake: .one) { $0.jobs.append(job) }
    }

    /// Lets the threads finish queued work and exit; waits up to `timeout`
    /// for them. Returns false if some were still busy then.
    @discardableResult
    public func stop(timeout: Duration) -> Bool {
        queue.update { $0.stopping = true }
        return queue.wait(for: timeout) { $0.running == 0 ? true : nil } ?? false
    }

    private enum Next { case run(Job), exit }

    private func run() {
        while true {
            let next = queue.wait { q -> Next? in
                if let job = q.take() { return .run(job) }
                return q.stopping ? .exit : nil
            }
            switch next {
            case .run(let job): job()
            case .exit:
                queue.update { $0.running -= 1 }
                return
            }
        }
    }
}
