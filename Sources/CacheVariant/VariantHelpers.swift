#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// How the pool runs its helpers (docs/operations.md, "Image variants").
public struct VariantPoolConfiguration: Sendable, Equatable {
    /// The `cached-variant` program (`VariantHelpers.locate`).
    public var executable: String
    /// Helpers running at most (`variant-helpers`): variants made at once.
    public var helpers: Int = 2
    /// Each helper's address space, RLIMIT_AS (`variant-memory`).
    public var memory: Int64 = 2 << 30
    /// Longest a job may take, from when a helper takes it (`variant-timeout`).
    public var jobTimeout = Duration.seconds(60)
    /// CPU time a job may use (RLIMIT_CPU's soft limit, moved on per job;
    /// the kernel counts whole seconds).
    public var cpuPerJob = Duration.seconds(30)
    /// CPU time a helper may use in its life (RLIMIT_CPU's hard limit);
    /// a helper past half of it is replaced before its next job.
    public var cpuPerHelper = Duration.seconds(3600)
    /// A helper is replaced after this many jobs (and after any job it
    /// refused or failed): a helper a hostile image took over answers few
    /// other images' jobs.
    public var jobsPerHelper = 100
    /// Longest a helper may take to start and sandbox itself.
    public var startTimeout = Duration.seconds(10)
    /// Jobs waiting for a helper at most; one more is refused `busy`.
    public var maxQueued = 256
    /// Threads a helper may start (RLIMIT_NPROC over the user's tasks at
    /// its start): libvips runs a few per job (its pool, one per core, and
    /// the codecs' own).
    public var threadsPerHelper = 64

    public init(executable: String) { self.executable = executable }
}

/// What the pool has done, for `status`.
public struct VariantPoolStats: Sendable, Equatable {
    /// Helpers started, and of them those that replaced one that failed.
    public var started = 0
    public var replaced = 0
    /// Helpers running now.
    public var running = 0
}

/// A bounded pool of `cached-variant` helpers: each runs on a thread of its
/// own (`cached-variant-N`), started with the first job, which feeds it jobs
/// one at a time, in the order queued. A helper that fails (crashes, hangs
/// past `jobTimeout`, breaks the protocol) fails that job only and is
/// replaced for the next. Suspect jobs (of an original that failed before)
/// take at most `maxSuspect` helpers at once: one helper stays for the
/// others, which pass a suspect job held back. Workers never wait here:
/// completions run on the pool's threads.
public final class VariantHelpers: Sendable {
    private struct Queued: Sendable {
        var job: VariantJob
        var completion: @Sendable (Result<MadeVariant, VariantFailure>) -> Void
    }
    private struct State {
        var queue: [Queued] = []
        var threads = 0
        var stopping = false
        var stats = VariantPoolStats()
        /// Suspect jobs (`VariantJob.suspect`) on a helper now.
        var suspectRunning = 0

        /// Takes the first queued job a helper may run now: any job of an
        /// original with no failure on record; a suspect one only while
        /// fewer than `maxSuspect` run, so that the helpers left stay free
        /// for the rest.
        mutating func takeNext(maxSuspect: Int) -> Queued? {
            let mayRunSuspect = suspectRunning < maxSuspect
            guard let i = queue.firstIndex(where: { !$0.job.suspect || mayRunSuspect }) else { return nil }
            let next = queue.remove(at: i)
            if next.job.suspect { suspectRunning += 1 }
            return next
        }
    }
    private let state = Monitor(State())
    private let configuration: Locked<VariantPoolConfiguration>
    private let log: Logger

    public init(_ configuration: VariantPoolConfiguration, log: Logger) {
        self.configuration = Locked(configuration)
        self.log = log
    }

    /// Queues `job`; `completion` runs on a pool thread once it is done.
    public func submit(_ job: VariantJob, _ completion: @escaping @Sendable (Result<MadeVariant, VariantFailure>) -> Void) {
        let c = configuration.withLock { $0 }
        let (refusal, startThreads): (VariantFailure?, Int) = state.update(wake: .one) { s in
            if s.stopping { return (.stopped, 0) }
            guard s.queue.count < c.maxQueued else {
                return (.busy("\(s.queue.count) variants are waiting for a helper already; try again later"), 0)
            }
            s.queue.append(Queued(job: job, completion: completion))
            // The threads start with the first job; each starts its helper with its own first job.
            let start = s.threads == 0 ? max(1, c.helpers) : 0
            s.threads += start
            return (nil, start)
        }
        if let refusal {
            job.source.close()
            completion(.failure(refusal))
            return
        }
        for n in 0..<startThreads {
            do throws(SystemError) { try Threads.start(name: "cached-variant-\(n)") { [self] in drive() } } catch {
                log.error("variant helpers: cannot start the cached-variant-\(n) thread: \(error)")
                let none = state.update { s -> [Queued] in
                    s.threads -= 1
                    // With no thread at all nothing would take the queue: fail it (the next job tries again).
                    guard s.threads == 0 else { return [] }
                    defer { s.queue = [] }
                    return s.queue
                }
                for q in none {
                    q.job.source.close()
                    q.completion(.failure(.unavailable("no thread could be started for the variant helpers: \(error)")))
                }
            }
        }
    }

    /// Applies reloaded limits: jobs from now on use them; running helpers
    /// keep their memory limit until they are replaced.
    public func apply(jobTimeout: Duration, memory: Int64) {
        configuration.withLock { $0.jobTimeout = jobTimeout; $0.memory = memory }
    }

    public var stats: VariantPoolStats { state.update { $0.stats } }

    /// Helpers suspect jobs may take at once: all but one (one at least,
    /// so with a single helper nothing is kept).
    static func maxSuspect(helpers: Int) -> Int { max(1, helpers - 1) }

    /// Refuses new jobs, fails the waiting ones, and has each thread stop
    /// its helper once its job (if any) ends.
    public func stop() {
        let waiting = state.update { s -> [Queued] in
            s.stopping = true
            defer { s.queue = [] }
            return s.queue
        }
        for q in waiting {
            q.job.source.close()
            q.completion(.failure(.stopped))
        }
    }

    /// One pool thread: takes jobs until the pool stops, starting its helper
    /// when it has none and replacing it after a failure.
    private func drive() {
        var helper: HelperProcess?
        let maxSuspect = Self.maxSuspect(helpers: configuration.withLock { $0.helpers })
        while let next = state.wait({ s -> Queued?? in
            if s.stopping { return .some(nil) }
            return s.takeNext(maxSuspect: maxSuspect).map { .some($0) }
        }) {
            let c = configuration.withLock { $0 }
            if let h = helper, h.hasEnded {
                // Killed while idle (the kernel's OOM killer, someone): the next job gets a new one.
                log.warning("variant helper \(h.pid) ended while idle; a new one takes the next job")
                _ = h.stop(killing: true)
                helper = nil
                state.update { $0.stats.running -= 1; $0.stats.replaced += 1 }
            } else if let h = helper, h.jobs >= c.jobsPerHelper || (h.cpuTime() ?? .zero) > c.cpuPerHelper / 2 {
                // Stopped outside the log call: a message is built only at its
                // level, and a helper stopped only there was left running.
                let ending = h.stop(killing: false)
                log.debug("variant helper \(h.pid) replaced after \(h.jobs) jobs: \(ending)")
                helper = nil
                state.update { $0.stats.running -= 1 }
            }
            let result = run(next.job, on: &helper, c)
            next.job.source.close()
            // A suspect job held back may go now.
            if next.job.suspect { state.update { $0.suspectRunning -= 1 } }
            next.completion(result)
        }
        if let helper { _ = helper.stop(killing: false) }
        state.update { $0.threads -= 1 }
    }

    /// Runs `job` on `helper`, starting one first when there is none.
    private func run(_ job: VariantJob, on helper: inout HelperProcess?, _ c: VariantPoolConfiguration) -> Result<MadeVariant, VariantFailure> {
        if helper == nil {
            do throws(VariantFailure) {
                let h = try HelperProcess.start(c)
                state.update { $0.stats.started += 1; $0.stats.running += 1 }
                helper = h
            } catch {
                log.error("variant helper: \(error)")
                return .failure(error)
            }
        }
        guard let h = helper else { return .failure(.stopped) }
        let deadline = Clock.instant(after: c.jobTimeout)
        let result = h.run(job, c, deadline: deadline)
        if case .failure(let e) = result, !e.endsHelper {
            // A refused image is the likeliest to be hostile: whatever it did
            // to this helper must not touch the next job's variant.
            let ending = h.stop(killing: false)
            log.debug("variant helper \(h.pid) replaced after a refused job: \(ending)")
            helper = nil
            state.update { $0.stats.running -= 1 }
            return result
        }
        if case .failure(let e) = result, e.endsHelper {
            let ending = h.stop(killing: true)
            helper = nil
            state.update { $0.stats.running -= 1; $0.stats.replaced += 1 }
            log.warning("variant helper \(h.pid) \(ending) during a job (\(job.spec)): \(e); the next job starts a new one")
            return .failure(Self.explained(e, ending))
        }
        return result
    }

    /// A helper's failure said with how the helper ended.
    private static func explained(_ e: VariantFailure, _ ending: String) -> VariantFailure {
        guard case .helperFailed(let m) = e else { return e }
        return .helperFailed("\(m); the helper \(ending)")
    }
}

extension VariantFailure {
    /// Whether the helper is unusable after this: its state is unknown.
    var endsHelper: Bool {
        switch self {
        case .helperFailed, .source: true
        case .refused, .notMade, .unavailable, .busy, .stopped: false
        }
    }
}
