#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheSystem

/// One running `cached-variant`: its process and the two pipes to it.
/// Owned by one driver thread of the pool; every call may block up to the
/// deadline it is given, never longer.
final class HelperProcess {
    let process: ChildProcess
    var pid: Int32 { process.pid }
    /// The helper's standard input (we write jobs).
    private let input: FileDescriptor
    /// The helper's standard output (we read results).
    private let output: FileDescriptor
    /// Jobs run on this helper.
    private(set) var jobs = 0
    private var received: [UInt8] = []
    /// Set by `stop`: its pipes are closed and its process reaped.
    private var stopped = false

    private init(pid: Int32, input: FileDescriptor, output: FileDescriptor) {
        process = ChildProcess(pid: pid)
        self.input = input
        self.output = output
    }

    /// A helper let go without `stop` would keep its process and both
    /// pipes for the daemon's life: it is killed and reaped here instead.
    deinit {
        if !stopped { _ = stop(killing: true) }
    }

    /// Starts the helper, limits its memory and CPU from outside, waits for
    /// its ready message and checks that it sandboxed itself (seccomp and
    /// no_new_privs in `/proc/PID/status`). A helper that does not is killed.
    static func start(_ c: VariantPoolConfiguration) throws(VariantFailure) -> HelperProcess {
        let toChild = try pipe(), fromChild = try pipe()
        let devNull = Glibc.open("/dev/null", OpenFlags.writeOnly.rawValue | O_CLOEXEC)
        defer {
            Glibc.close(toChild.0)
            Glibc.close(fromChild.1)
            if devNull >= 0 { Glibc.close(devNull) }
        }
        var pid: Int32 = 0
        let rc = withCStrings([c.executable, "--serve", "--parent", String(getpid())]) { argv in
            // Two malloc arenas keep its address space small (each reserves
            // 64 MiB); a crash is not symbolicated (the Swift runtime's
            // backtracer would hold a dying helper for seconds).
            withCStrings(["MALLOC_ARENA_MAX=2", "LC_ALL=C", "SWIFT_BACKTRACE=enable=no"]) { envp in
                clinux_spawn(c.executable, argv, envp, toChild.0, fromChild.1, devNull >= 0 ? devNull : 2, &pid)
            }
        }
        guard rc == 0 else {
            Glibc.close(toChild.1)
            Glibc.close(fromChild.0)
            throw .unavailable("cannot start \(c.executable): \(String(cString: strerror(rc)))")
        }
        let helper = HelperProcess(pid: pid, input: FileDescriptor(rawValue: toChild.1, path: "variant helper"),
                                   output: FileDescriptor(rawValue: fromChild.0, path: "variant helper"))
        do throws(VariantFailure) {
            try helper.limit(c)
            try helper.awaitReady(deadline: Clock.instant(after: c.startTimeout))
            try helper.checkSandbox()
        } catch {
            // Say how it ended: a helper that died while starting says nothing itself.
            let why: String
            if case .unavailable(let m) = error { why = m } else { why = "\(error)" }
            throw .unavailable("\(why); the helper \(helper.stop(killing: true))")
        }
        return helper
    }

    private static func pipe() throws(VariantFailure) -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        guard clinux_pipe_cloexec(&fds) == 0 else {
            throw .unavailable("pipe: \(String(cString: strerror(errno)))")
        }
        return (fds[0], fds[1])
    }

    /// RLIMIT_AS, RLIMIT_CPU's hard limit for the helper's life (each job
    /// sets the soft one), and RLIMIT_NPROC: the user's tasks now and
    /// `threadsPerHelper` more, so that a helper a hostile image took over
    /// cannot spend the tasks the daemon's threads need (not enforced for
    /// root, whose limit the kernel does not check).
    private func limit(_ c: VariantPoolConfiguration) throws(VariantFailure) {
        let memory = UInt64(c.memory)
        let running: Int
        do throws(SystemError) { running = try ChildProcess.tasks(ofUser: getuid()) } catch {
            throw .unavailable("cannot count this user's tasks for the helper's RLIMIT_NPROC: \(error)")
        }
        let tasks = UInt64(running + c.threadsPerHelper)
        do throws(SystemError) {
            try process.setLimit(.addressSpace, soft: memory, hard: memory)
            try process.setLimit(.cpuSeconds, soft: Self.cpuLimit(c.cpuPerJob), hard: Self.cpuLimit(c.cpuPerHelper))
            try process.setLimit(.tasks, soft: tasks, hard: tasks)
        } catch { throw .unavailable("cannot limit the helper: \(error)") }
        do throws(SystemError) {
            try input.setNonBlocking()
            try output.setNonBlocking()
        } catch { throw .unavailable("\(error)") }
    }

    private func awaitReady(deadline: UInt64) throws(VariantFailure) {
        while received.count < VariantWire.readySize {
            try receive(deadline: deadline, what: "its ready message")
        }
        guard Array(received.prefix(VariantWire.readySize)) == VariantWire.ready else {
            throw .unavailable("the helper's first message was not its ready message (a cached-variant of another version?)")
        }
        received.removeFirst(VariantWire.readySize)
    }

    /// The kernel's word that the helper runs under a seccomp filter of its
    /// own with no_new_privs: what it says of itself is not taken on trust.
    /// It must have more filters than the daemon (which may run under its
    /// unit's filter and no_new_privs already, and those a child inherits).
    private func checkSandbox() throws(VariantFailure) {
        let status = process.status()
        let own = ChildProcess.current.status().seccompFilters ?? 0
        guard status.seccompMode == 2, status.noNewPrivileges, let filters = status.seccompFilters, filters > own else {
            throw .unavailable("the helper is not sandboxed (its /proc status shows no seccomp filter of its own, or no no_new_privs)")
        }
    }

    /// Whether the helper has ended (crashed, killed) since its last job.
    var hasEnded: Bool { process.reapIfEnded() != nil }

    /// RLIMIT_CPU's value for `time`: whole seconds, at least one.
    static func cpuLimit(_ time: Duration) -> UInt64 { UInt64(max(1, time.wholeSeconds)) }

    /// The helper's CPU time so far (`/proc/PID/stat`).
    func cpuTime() -> Duration? { process.cpuTime() }

    /// Runs one job: its header and source out, its result back, within
    /// `deadline`. A failure of the helper leaves it unusable: stop it.
    func run(_ job: VariantJob, _ c: VariantPoolConfiguration, deadline: UInt64) -> Result<MadeVariant, VariantFailure> {
        jobs += 1
        // The soft limit moves on by one job's CPU time; the hard one, set
        // at start, stays (raising it would take a privilege).
        if let used = self.cpuTime() {
            let hard = Self.cpuLimit(c.cpuPerHelper)
            let soft = min(Self.cpuLimit(used + .seconds(1)) + Self.cpuLimit(c.cpuPerJob), hard)
            // Not lowered, the job runs on under the hard limit alone.
            try? process.setLimit(.cpuSeconds, soft: soft, hard: hard)
        }
        do throws(VariantFailure) {
            var sender = JobSender(header: job.wireHeader.encoded, source: job.source, size: job.sourceSize)
            var result: VariantWire.ResultHeader?
            while true {
                if result == nil, received.count >= VariantWire.resultHeaderSize {
                    result = try decodeHeader(job)
                }
                if let r = result, Int64(received.count) >= r.length {
                    let answer = finish(r)
                    // Bytes past the result would be read as the next job's: the stream is broken.
                    guard received.isEmpty else { return .failure(.helperFailed("it sent \(received.count) bytes past its result")) }
                    return answer
                }
                try exchange(&sender, deadline: deadline)
            }
        } catch {
            return .failure(error)
        }
    }

    private func decodeHeader(_ job: VariantJob) throws(VariantFailure) -> VariantWire.ResultHeader {
        let head = Array(received.prefix(VariantWire.resultHeaderSize))
        received.removeFirst(VariantWire.resultHeaderSize)
        let r: VariantWire.ResultHeader
        switch VariantWire.ResultHeader.decode(head) {
        case .success(let h): r = h
        case .failure(let e): throw .helperFailed("it broke the protocol: \(e)")
        }
        let bound = r.status == .made ? job.maxResult : Int64(VariantWire.maxMessage)
        guard r.length <= bound else { throw .helperFailed("it announced \(r.length) bytes, over the bound of \(bound)") }
        if r.status == .made {
            let side = Int64(max(job.spec.width ?? job.maxDimension, job.spec.height ?? job.maxDimension, job.maxDimension))
            guard r.width > 0, r.height > 0, Int64(r.width) <= side, Int64(r.height) <= side else {
                throw .helperFailed("it announced a variant of \(r.width) x \(r.height) pixels")
            }
        }
        return r
    }

    private func finish(_ r: VariantWire.ResultHeader) -> Result<MadeVariant, VariantFailure> {
        let bytes = Array(received.prefix(Int(r.length)))
        received.removeFirst(Int(r.length))
        switch r.status {
        case .made: return .success(MadeVariant(bytes: bytes, width: r.width, height: r.height))
        case .refused: return .failure(.refused(Self.message(bytes)))
        case .failed: return .failure(.notMade(Self.message(bytes)))
        }
    }

    /// The helper's message, as text fit for a log line.
    static func message(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        let clean = String(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : Character($0) })
        return clean.trimmed().isEmpty ? "(no message)" : clean.trimmed()
    }

    /// One turn: waits (up to the deadline) until the helper can take bytes
    /// or has sent some, then moves what it can both ways.
    private func exchange(_ sender: inout JobSender, deadline: UInt64) throws(VariantFailure) {
        let now = Clock.monotonicNanoseconds()
        guard now < deadline else { throw .helperFailed("it took longer than variant-timeout") }
        var fds = [pollfd(fd: output.rawValue, events: Int16(POLLIN), revents: 0)]
        if !sender.done { fds.append(pollfd(fd: input.rawValue, events: Int16(POLLOUT), revents: 0)) }
        let wait = min(Clock.elapsed(since: now, now: deadline).millisecondsRoundedUp, 1000)
        let n = poll(&fds, nfds_t(fds.count), wait)
        if n < 0 && errno != EINTR { throw .helperFailed("poll: \(String(cString: strerror(errno)))") }
        guard n > 0 else { return }
        if fds[0].revents != 0 { try receiveSome() }
        if fds.count > 1, fds[1].revents != 0 { try sender.send(to: input) }
    }

    private func receive(deadline: UInt64, what: String) throws(VariantFailure) {
        let now = Clock.monotonicNanoseconds()
        guard now < deadline else { throw .unavailable("the helper did not send \(what) in time") }
        var fds = [pollfd(fd: output.rawValue, events: Int16(POLLIN), revents: 0)]
        let n = poll(&fds, 1, min(Clock.elapsed(since: now, now: deadline).millisecondsRoundedUp, 1000))
        if n > 0 {
            do throws(VariantFailure) { try receiveSome() } catch { throw .unavailable("\(error)") }
        }
    }

    /// Reads what the helper sent; its end of the pipe closing means it died.
    private func receiveSome() throws(VariantFailure) {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        let n = chunk.withUnsafeMutableBytes { Glibc.read(output.rawValue, $0.baseAddress, $0.count) }
        if n > 0 { received.append(contentsOf: chunk[0..<n]); return }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        throw .helperFailed(n == 0 ? "it closed its output" : "reading from it: \(String(cString: strerror(errno)))")
    }

    /// Ends the helper: closing its input ends its loop; `killing` does not
    /// wait for that. Returns how it ended, for a log line ("was stopped by
    /// the daemon" when it had not ended by itself when killed).
    func stop(killing: Bool) -> String {
        guard !stopped else { return "had been stopped" }
        stopped = true
        input.close()
        output.close()
        if killing {
            // Ending already (crashed, killed by the kernel: its pipes close
            // before it can be reaped): say how, once it has.
            if let status = process.reap(attempts: 20, interval: .milliseconds(5)) { return Self.ending(status) }
            return process.killAndReap() != nil ? "was stopped by the daemon" : "was not reaped"
        }
        // A helper told to stop by its input closing has 2 s; then it is killed.
        if let status = process.reap(attempts: 200, interval: .milliseconds(10)) { return Self.ending(status) }
        return process.killAndReap() != nil ? "was stopped by the daemon after 2 s" : "was not reaped"
    }

    /// `status` (from `waitpid`) in words, after "the helper".
    static func ending(_ status: Int32) -> String {
        let signal = status & 0x7F
        if signal == 0 { return "exited with status \((status >> 8) & 0xFF)" }
        switch signal {
        case SIGXCPU: return "was stopped at its CPU time limit (SIGXCPU)"
        case SIGKILL: return "was killed (SIGKILL: its CPU hard limit, the kernel's out-of-memory killer, or someone else)"
        case SIGABRT: return "aborted (SIGABRT; an allocation past its address-space limit aborts it)"
        case SIGSYS: return "was stopped by its syscall filter (SIGSYS)"
        default: return "crashed (signal \(signal))"
        }
    }
}

/// The bytes of one job going out: the header, then the source read from
/// its descriptor a piece at a time.
struct JobSender {
    private var pending: [UInt8]
    private var offset = 0
    private let source: FileDescriptor
    private let size: Int64
    private var read: Int64 = 0
    private(set) var done = false

    init(header: [UInt8], source: FileDescriptor, size: Int64) {
        pending = header
        self.source = source
        self.size = size
    }

    /// Writes what the pipe takes now.
    mutating func send(to pipe: FileDescriptor) throws(VariantFailure) {
        if offset == pending.count { try refill() }
        guard !done else { return }
        let n = pending.withUnsafeBytes { Glibc.write(pipe.rawValue, $0.baseAddress! + offset, $0.count - offset) }
        if n > 0 { offset += n; if offset == pending.count && read == size { done = true }; return }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        throw .helperFailed(n < 0 && errno == EPIPE ? "it closed its input" : "writing to it: \(String(cString: strerror(errno)))")
    }

    private mutating func refill() throws(VariantFailure) {
        guard read < size else { done = true; return }
        var chunk = [UInt8](repeating: 0, count: Int(min(256 << 10, size - read)))
        let n: Int
        do throws(SystemError) {
            n = try chunk.withMutableBytes { (b) throws(SystemError) -> Int in try source.read(into: b, at: read) }
        } catch { throw .source(error) }
        guard n > 0 else { throw .source(SystemError("pread", source.path, errno: EIO)) }
        pending = Array(chunk[0..<n])
        offset = 0
        read += Int64(n)
    }
}

/// `body` with `strings` as a NULL-terminated array of C strings.
func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for p in pointers { free(p) } }
    return body(pointers)
}
