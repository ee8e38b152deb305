#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheProtocol
import CacheService
import CacheSystem

/// Wires the parts together and owns their lifetimes: the service, the
/// socket, the event loop, systemd's notifications (docs/architecture.md).
final class Daemon {
    let settings: Settings
    let arguments: [String]
    let environment: [String: String]
    let log: Logger

    init(settings: Settings, arguments: [String], environment: [String: String]) {
        self.settings = settings
        self.arguments = arguments
        self.environment = environment
        log = Logger(level: settings.logLevel, environment: environment)
    }

    /// Runs until SIGTERM or SIGINT; returns the exit status.
    func run() -> Int32 {
        // Signals first, so that every thread started later has them blocked.
        clinux_ignore_sigpipe()
        raiseOpenFileLimit()
        _ = clinux_tune_malloc(Self.mallocTrimThreshold, Self.mallocMmapThreshold)
        let signalFD = clinux_signalfd_termination()
        let manager = ServiceManager(environment: environment)

        let service: CacheService
        do { service = try CacheService.open(settings.serviceConfiguration, userAgent: "cached/\(cachedVersion)", log: log) } catch {
            log.error("\(error)")
            return 1
        }
        guard let sockets = openListeners(manager) else {
            service.shutdown()
            return 1
        }
        let ownSocket = sockets.socketPath
        let dispatcher = Dispatcher(service: service, socketPath: ownSocket ?? "(inherited)")
        let loop: EventLoop
        do {
            loop = try EventLoop(listeners: sockets.listeners, signalFD: signalFD, limits: settings.loopLimits, log: log, observer: service)
        } catch {
            log.error("cannot start the event loop: \(error)")
            sockets.closeAll(log)
            service.shutdown()
            return 1
        }
        loop.handler = { request, reply in dispatcher.handle(request, reply) }
        loop.submit = { [service] job in service.onWorker(job) }
        let http = sockets.http.isEmpty ? nil
            : HTTPFrontEnd(service: service, allowAdmin: settings.httpAllowAdmin,
                           hosts: HTTPHostPolicy(allowedHosts: settings.httpAllowedHosts, trustForwarded: settings.httpTrustForwarded),
                           showPaths: settings.httpShowPaths)
        if let http {
            loop.http = http
            service.onEvent = { [events = http.events] in events.publish($0) }
        }
        var running = settings
        loop.onFileReadError = { [service] path, file, error in service.objectReadFailed(path: path, file: file, error) }
        loop.onReload = { [unowned loop, self] in self.reload(loop, service, current: &running) }
        startWatchdog(loop, manager, http)
        service.start()
        if !settings.allFetchHeaders.isEmpty { log.info("fetch-header: sending \(settings.fetchCredentials)") }
        announceReady(service, manager, socket: ownSocket, http: sockets.http)
        if settings.prefetchOnStart { prefetchOnStart(service) }

        loop.run()

        manager.notify("STOPPING=1")
        log.notice("stopping")
        service.onEvent = nil
        service.shutdown()
        sockets.removeOwnPaths(log)
        log.notice("stopped")
        return 0
    }

    /// Owner and group may connect (docs/operations.md, "Access").
    static let socketMode: UInt32 = 0o660

    private func announceReady(_ service: CacheService, _ manager: ServiceManager, socket: String?, http: [String]) {
        let s = service.status()
        let httpText = http.isEmpty ? "" : ", HTTP on \(http.joined(separator: ", "))"
        log.notice("cached \(cachedVersion) ready: store \(s.storeDirectory), socket \(socket ?? "inherited from systemd")\(httpText), \(s.posts) posts, \(s.imagesCached)/\(s.images) images cached, \(s.logRecords) log records")
        manager.notify("READY=1\nSTATUS=serving \(s.posts) posts, \(s.imagesCached)/\(s.images) images cached")
        service.onPrefetchFinished = { [weak service] in
            guard let s = service?.status() else { return }
            manager.notify("STATUS=serving \(s.posts) posts, \(s.imagesCached)/\(s.images) images cached")
        }
    }

    private func prefetchOnStart(_ service: CacheService) {
        service.prefetch(.all, force: false, progress: { _ in }) { [log] result in
            switch result {
            case .success: log.info("start-up prefetch finished")
            case .failure(let e): log.warning("start-up prefetch failed: \(e)")
            }
        }
    }

    /// The watchdog is pinged from the loop itself, at half the interval
    /// (the loop ticks once a second, so intervals under 2 s ping every tick).
    private func startWatchdog(_ loop: EventLoop, _ manager: ServiceManager, _ http: HTTPFrontEnd?) {
        guard let interval = manager.watchdogInterval else {
            if let http { loop.onTick = { http.tick() } }
            return
        }
        var last: UInt64 = 0
        loop.onTick = {
            http?.tick()
            let now = Clock.monotonicNanoseconds()
            if Clock.elapsed(since: last, now: now) >= interval / 2 || interval < .seconds(2) {
                manager.notify("WATCHDOG=1")
                last = now
            }
        }
        log.info("watchdog: pinging every \((interval / 2).millisecondsRoundedUp) ms")
    }

    /// SIGHUP: reads the configuration again (file, environment, flags, as at
    /// start) and applies what can change while running. An invalid file is
    /// rejected and the running configuration kept.
    func reload(_ loop: EventLoop, _ service: CacheService, current: inout Settings) {
        let fresh: Settings
        do {
            guard case .run(let s) = try Settings.parse(arguments: arguments, environment: environment) else { return }
            fresh = s
        } catch {
            log.error("SIGHUP: configuration not reloaded, keeping the running one: \(error)")
            return
        }
        let plan = current.reloadPlan(to: fresh)
        service.apply(plan.applied.feedConfiguration)
        service.apply(plan.applied.fetchCredentials)
        service.apply(plan.applied.scrubSettings)
        service.apply(plan.applied.variantSettings)
        service.apply(variantTimeout: plan.applied.variantTimeout, memory: plan.applied.variantMemory)
        log.setLevel(plan.applied.logLevel)
        loop.limits = plan.applied.loopLimits
        let source = fresh.configFile ?? "the environment and flags"
        log.notice("SIGHUP: reloaded \(source): " + (plan.changes.isEmpty ? "nothing changed" : plan.changes.joined(separator: ", ")) +
                   (plan.needRestart.isEmpty ? "" : "; needs a restart to change: " + plan.needRestart.joined(separator: ", ")))
        current = plan.applied
    }

    /// Every inline `read` answer is a fresh buffer of up to 256 KiB. With
    /// glibc's moving thresholds, freeing one at the top of the heap often
    /// returned the memory to the kernel, and the next answer faulted fresh
    /// pages in again (measured: read throughput 0.73-0.88x of 0.1.0's, the
    /// brk calls +43%). Keeping up to 8 MiB of freed heap, and taking
    /// blocks under 1 MiB from the heap, ends the churn for little memory.
    static let mallocTrimThreshold: Int32 = 8 << 20
    static let mallocMmapThreshold: Int32 = 1 << 20

    /// Descriptors beyond one per connection: the listeners, the store's
    /// files, objects being sent, curl's sockets and temp files.
    static let spareDescriptors = 256

    /// Raises the soft limit on open files to the hard limit: each connection
    /// and each object being sent holds a descriptor.
    private func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = rlim_t(settings.maxConnections + Self.spareDescriptors)
        if limit.rlim_cur < wanted {
            limit.rlim_cur = min(limit.rlim_max, wanted)
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        if limit.rlim_cur < wanted {
            log.warning("the open-file limit is \(limit.rlim_cur); max-connections \(settings.maxConnections) needs about \(wanted) (raise LimitNOFILE=)")
        }
    }
}

/// The service's counters take what the loop reports.
extension CacheService: LoopObserver {
    func requests(_ count: Int, errors: Int) { noteRequests(count, errors: errors) }
    func connection(opened: Bool) { noteConnection(opened: opened) }
}
