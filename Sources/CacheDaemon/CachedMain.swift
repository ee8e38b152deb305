#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheFetch
import CacheProtocol
import CacheStore
import CacheSystem

/// The `cached` executable.
public enum CachedMain {
    /// Parses the command line, runs the daemon until SIGTERM or SIGINT, and exits.
    public static func run() -> Never {
        let environment = Environment.current()
        let arguments = Array(CommandLine.arguments.dropFirst())
        let settings: Settings
        do {
            switch try Settings.parse(arguments: arguments, environment: environment) {
            case .help:
                print(Settings.usage)
                exit(0)
            case .version:
                print("cached \(cachedVersion) (protocol \(protocolVersion))")
                exit(0)
            case .run(let s):
                settings = s
            case .checked(let s):
                print("configuration OK" + (s.configFile.map { " (\($0))" } ?? " (no configuration file)"))
                print("store \(s.store), socket \(s.socket), posts-url \(s.postsURL ?? "-"), images-url \(s.imagesURL ?? "-")")
                exit(0)
            }
        } catch {
            var line = Array("cached: \(error)\n".utf8)
            _ = line.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
            exit(2)
        }
        exit(Daemon(settings: settings, arguments: arguments, environment: environment).run())
    }
}

/// Wires the parts together and owns their lifetimes.
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
        var changes = service.reload(fresh)
        if fresh.logLevel != current.logLevel {
            changes.append("log-level \(current.logLevel.name) -> \(fresh.logLevel.name)")
            log.setLevel(fresh.logLevel)
        }
        var limits = loop.limits
        limits.maxConnections = fresh.maxConnections
        limits.maxQueuedBytes = Int(fresh.maxQueuedBytes)
        limits.idleNanoseconds = UInt64(fresh.idleTimeout * 1e9)
        limits.maxJSONDepth = fresh.maxJSONDepth
        if fresh.maxConnections != current.maxConnections { changes.append("max-connections \(current.maxConnections) -> \(fresh.maxConnections)") }
        if fresh.maxQueuedBytes != current.maxQueuedBytes { changes.append("max-queued-bytes \(current.maxQueuedBytes) -> \(fresh.maxQueuedBytes)") }
        if fresh.idleTimeout != current.idleTimeout { changes.append("idle-timeout \(current.idleTimeout) -> \(fresh.idleTimeout)") }
        if fresh.maxJSONDepth != current.maxJSONDepth { changes.append("max-json-depth \(current.maxJSONDepth) -> \(fresh.maxJSONDepth)") }
        loop.limits = limits
        var restart: [String] = []
        if fresh.store != current.store { restart.append("store") }
        if fresh.socket != current.socket { restart.append("socket") }
        if fresh.maxSize != current.maxSize { restart.append("max-size") }
        restart += Settings.fetchDifferences(fresh.fetch, current.fetch)
        if fresh.prefetchOnStart != current.prefetchOnStart { restart.append("prefetch-on-start") }
        let source = fresh.configFile ?? "the environment and flags"
        log.notice("SIGHUP: reloaded \(source): " + (changes.isEmpty ? "nothing changed" : changes.joined(separator: ", ")) +
                   (restart.isEmpty ? "" : "; needs a restart to change: " + restart.joined(separator: ", ")))
        // What a restart would apply stays as it runs now.
        var applied = fresh
        applied.store = current.store
        applied.socket = current.socket
        applied.maxSize = current.maxSize
        applied.fetch = current.fetch
        applied.prefetchOnStart = current.prefetchOnStart
        current = applied
    }

    /// Raises the soft limit on open files to the hard limit: each connection
    /// and each object being sent holds a descriptor.
    private func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = rlim_t(settings.maxConnections + 256)
        if limit.rlim_cur < wanted {
            limit.rlim_cur = min(limit.rlim_max, wanted)
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        if limit.rlim_cur < wanted {
            log.warning("the open-file limit is \(limit.rlim_cur); max-connections \(settings.maxConnections) needs about \(wanted) (raise LimitNOFILE=)")
        }
    }

    /// Returns the exit status.
    func run() -> Int32 {
        // Signals first, so that every thread started later has them blocked.
        clinux_ignore_sigpipe()
        raiseOpenFileLimit()
        let signalFD = clinux_signalfd_termination()
        let manager = ServiceManager(environment: environment)

        let store: Store
        do {
            var config = StoreConfiguration(directory: settings.store, maxBytes: settings.maxSize)
            config.compactionSlack = 10_000
            config.onWritesStopped = { [log] why in
                log.error("store writes stopped: \(why); reads go on, every write now fails; restart cached to reopen the store")
            }
            store = try Store(config)
        } catch {
            log.error("cannot open the store: \(error)")
            return 1
        }
        if let r = store.recovery {
            log.warning("index.log was damaged (\(r.problem)); kept \(r.cutOffset) bytes, moved \(r.cutLength) bytes from offset \(r.cutOffset) to \(r.savedTo)")
        }
        for feed in store.damagedValidators.sorted(by: { $0.rawValue < $1.rawValue }) {
            log.warning("the stored ETag or Last-Modified of the \(feed == .posts ? "posts feed" : "image manifest") held a control character and was dropped; its next refresh is unconditional")
        }

        var listeners = manager.inheritedSockets()
        var ownSocket: String?
        if listeners.isEmpty {
            let socketDirectory = FileSystem.directoryName(of: settings.socket)
            do {
                try FileSystem.makeDirectories(socketDirectory, mode: 0o755)
            } catch {
                log.error("cannot listen on \(settings.socket): \(error)")
                store.close()
                return 1
            }
            // Another user who owns or can write the socket's directory could
            // replace the socket after the bind and answer clients in our name.
            // The per-user default (/tmp/cached-<uid>) must be this user's own.
            let isPrivateDefault = socketDirectory == DefaultPaths.privateTempDirectory
            if let problem = TrustedDirectory.problem(socketDirectory, allowRoot: !isPrivateDefault, allowSticky: !isPrivateDefault, followLink: !isPrivateDefault)
                ?? TrustedDirectory.ancestorsProblem(of: socketDirectory).map({ "a directory above the socket: \($0)" }) {
                log.error("refusing to listen on \(settings.socket): \(problem)")
                store.close()
                return 1
            }
            do {
                listeners = [try UnixSocket.listen(path: settings.socket, mode: 0o660)]
                ownSocket = settings.socket
            } catch {
                log.error("cannot listen on \(settings.socket): \(error)")
                store.close()
                return 1
            }
        }

        let counters = Counters(CounterValues())
        let pool = WorkerPool(threads: 4, name: "cached-worker")
        var policy = settings.fetch
        policy.userAgent = "cached/\(cachedVersion)"
        let http = HTTPClient(policy: policy)
        let service = CacheService(store: store, http: http, pool: pool, log: log, counters: counters, settings: settings)
        let dispatcher = Dispatcher(service: service, socketPath: ownSocket ?? "(inherited)")

        let loop: EventLoop
        do {
            var limits = LoopLimits()
            limits.maxConnections = settings.maxConnections
            limits.maxQueuedBytes = Int(settings.maxQueuedBytes)
            limits.idleNanoseconds = UInt64(settings.idleTimeout * 1e9)
            limits.maxJSONDepth = settings.maxJSONDepth
            loop = try EventLoop(listeners: listeners, signalFD: signalFD, limits: limits, log: log, counters: counters)
        } catch {
            log.error("cannot start the event loop: \(error)")
            return 1
        }
        loop.handler = { request, reply in dispatcher.handle(request, reply) }
        var running = settings
        loop.onReload = { [unowned loop, self] in self.reload(loop, service, current: &running) }
        // The watchdog is pinged from the loop itself, at half the interval
        // (the loop ticks once a second, so intervals under 2 s ping every tick).
        if let interval = manager.watchdogInterval {
            var last: UInt64 = 0
            loop.onTick = {
                let now = Clock.monotonicNanoseconds()
                if now - last >= interval / 2 || interval < 2_000_000_000 {
                    manager.notify("WATCHDOG=1")
                    last = now
                }
            }
            log.info("watchdog: pinging every \(interval / 2_000_000) ms")
        }

        // Recovery that need not delay readiness: post files that differ from
        // the log, objects whose files went missing.
        pool.submit { [log] in
            let fixed = store.reconcilePostFiles()
            if fixed > 0 { log.notice("rewrote \(fixed) post files to match the index") }
            do {
                let dropped = try store.dropMissingObjects()
                if dropped > 0 { log.warning("\(dropped) objects named in the index had no file or the wrong size; their rows will be fetched again on demand") }
            } catch { log.warning("could not check object files: \(error)") }
        }

        let stats = store.stats()
        log.notice("cached \(cachedVersion) ready: store \(store.directory), socket \(ownSocket ?? "inherited from systemd"), \(stats.posts) posts, \(stats.rowsCached)/\(stats.rows) images cached, \(stats.logRecords) log records")
        manager.notify("READY=1\nSTATUS=serving \(stats.posts) posts, \(stats.rowsCached)/\(stats.rows) images cached")

        service.onPrefetchFinished = { [store] in
            let s = store.stats()
            manager.notify("STATUS=serving \(s.posts) posts, \(s.rowsCached)/\(s.rows) images cached")
        }
        if settings.prefetchOnStart {
            service.prefetch(what: .all, force: false, progress: { _ in }) { [log] result in
                switch result {
                case .success: log.info("start-up prefetch finished")
                case .failure(let e): log.warning("start-up prefetch failed: \(e.message)")
                }
            }
        }

        // Use times reach the log once a minute, so eviction order survives restarts.
        let stopping = Locked(false)
        Threads.start(name: "cached-access") { [log] in
            var seconds = 0
            while !stopping.withLock({ $0 }) {
                sleep(1)
                seconds += 1
                if seconds % 60 == 0 {
                    do { try store.logAccessTimes() } catch { log.warning("could not log access times: \(error)") }
                }
            }
        }

        loop.run()
        stopping.withLock { $0 = true }

        manager.notify("STOPPING=1")
        log.notice("stopping")
        // Cancel transfers (their temp files are discarded), let the workers
        // finish what is queued (commits in progress complete or roll back),
        // and only then close the log. Anything abandoned in tmp/ is removed
        // at the next start.
        http.shutdown(timeout: 5)
        if !pool.stop(timeout: 10) { log.warning("workers still busy at exit; their work is abandoned") }
        if let path = ownSocket { try? FileSystem.unlink(path) }
        do { try store.logAccessTimes() } catch { log.warning("could not log access times: \(error)") }
        store.close()
        log.notice("stopped")
        return 0
    }
}
