#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import CCurl
import CacheSystem

/// What the fetch thread is handed through `HTTPClient`'s locks: a transfer
/// (a class with libcurl's state) or the `curl_multi` handle.
// Safe without Sendable contents because each value is handed over, never
// shared: a `Transfer` is built by the submitting thread, which keeps no
// reference, and from then on only the fetch thread touches it; the multi
// handle is used by the fetch thread, and by others only for
// `curl_multi_wakeup`, which libcurl documents as callable from any thread.
private struct Handoff<Value>: @unchecked Sendable {
    let value: Value
}
private typealias Pending = Handoff<Transfer>

/// HTTP GETs through one `curl_multi` handle on a dedicated thread.
///
/// Transfers run `concurrency` at a time over reused connections; bodies
/// stream into each request's `BodySink`. Connection errors, timeouts and 5xx
/// answers are retried with exponential backoff and jitter; 4xx answers are
/// not. Only `http` and `https` URLs are fetched, redirects included.
///
/// Redirects are followed here, hop by hop, rather than by libcurl: each
/// hop gets the configured credentials (`credentials`) only when it is on
/// the origin the request began at and that origin is one they are for.
/// libcurl's own rule covers `Authorization` and `Cookie` alone; a custom
/// header such as `X-Api-Key` would go to any host a redirect names.
public final class HTTPClient: Sendable {
    private struct Shared {
        var incoming: [Pending] = []
        var stopping = false
    }
    private let shared = Locked(Shared())
    /// Signalled when the fetch thread has exited.
    private let exited = DispatchSemaphore(value: 0)
    private let multi: Locked<Handoff<UnsafeMutableRawPointer>?>
    public let policy: FetchPolicy
    private let credentialState: Locked<FetchCredentials>

    /// A client with its own thread; `credentials` are added per request
    /// (see `credentials`). Throws when its thread cannot be created.
    public init(policy: FetchPolicy, credentials: FetchCredentials = .none) throws(SystemError) {
        self.policy = policy
        credentialState = Locked(credentials)
        curl_global_init(Int(CURL_GLOBAL_ALL))
        let m = curl_multi_init()
        multi = Locked(m.map { Handoff(value: $0) })
        if let m {
            // At most `concurrency` connections in all and to any one host, kept
            // open between transfers (and prefetches) for reuse. Over HTTP/2,
            // transfers to one host multiplex on a single connection.
            ccurl_multi_setopt_long(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, policy.concurrency)
            ccurl_multi_setopt_long(m, CURLMOPT_MAX_HOST_CONNECTIONS, policy.concurrency)
            ccurl_multi_setopt_long(m, CURLMOPT_MAXCONNECTS, policy.concurrency * 2)
            ccurl_multi_setopt_long(m, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        }
        try Threads.start(name: "cached-fetch") { [self] in
            self.run()
            self.exited.signal()
        }
    }

    /// The configured headers and the origins they go to; a change (a
    /// reload) applies to every hop that starts after it.
    public var credentials: FetchCredentials {
        get { credentialState.withLock { $0 } }
        set { credentialState.withLock { $0 = newValue } }
    }

    /// True for URLs this client will fetch.
    public static func isFetchable(_ url: String) -> Bool {
        URLScheme.isHTTP(url)
    }

    /// Starts a GET; `completion` runs on the fetch thread and must not block.
    public func fetch(_ request: FetchRequest, into sink: BodySink,
                      completion: @escaping @Sendable (Result<HTTPResponse, FetchError>) -> Void) {
        guard HTTPClient.isFetchable(request.url) else {
            completion(.failure(.unsupportedScheme(url: request.url)))
            return
        }
        let stopping = shared.withLock { s -> Bool in
            if !s.stopping { s.incoming.append(Pending(value: Transfer(request: request, sink: sink, completion: completion))) }
            return s.stopping
        }
        if stopping { completion(.failure(.cancelled(url: request.url))); return }
        wake()
    }

    /// Cancels queued and running transfers (their completions report
    /// `cancelled`) and waits up to `timeout` for the fetch thread to end.
    /// Returns false when it had not ended then (blocked in a sink's write to
    /// a failing disk): it may still hand over a transfer that finished.
    @discardableResult
    public func shutdown(timeout: Duration = .seconds(5)) -> Bool {
        shared.withLock { $0.stopping = true }
        wake()
        // The thread signals once; passed on, so a later shutdown returns at once too.
        guard exited.wait(timeout: .now() + .nanoseconds(Int(timeout.wholeNanoseconds))) == .success else { return false }
        exited.signal()
        return true
    }

    private func wake() {
        multi.withLock { m in if let m { _ = curl_multi_wakeup(m.value) } }
    }

    // MARK: The fetch thread

    /// The fetch thread: takes new transfers, drives `curl_multi`, retries
    /// and finishes transfers, until shutdown.
    // A little over a screen: one loop whose local state (active, waiting,
    // delayed) every step shares; each step is a few lines with a comment.
    private func run() {
        guard let m = multi.withLock({ $0?.value }) else { return }
        var waiting: [Transfer] = []
        var delayed: [(due: UInt64, transfer: Transfer)] = []
        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        while true {
            let (incoming, stopping) = shared.withLock { s -> ([Pending], Bool) in
                let i = s.incoming
                s.incoming.removeAll()
                return (i, s.stopping)
            }
            waiting.append(contentsOf: incoming.map(\.value))
            if stopping {
                for t in waiting + delayed.map(\.transfer) { t.completion(.failure(.cancelled(url: t.request.url))) }
                for (easy, t) in active {
                    curl_multi_remove_handle(m, easy)
                    cleanup(t)
                    t.completion(.failure(.cancelled(url: t.request.url)))
                }
                // The multi handle (and its connection cache) goes with the thread.
                multi.withLock { $0 = nil }
                curl_multi_cleanup(m)
                return
            }
            let now = Clock.monotonicNanoseconds()
            delayed.removeAll { item in
                if item.due <= now { waiting.append(item.transfer); return true }
                return false
            }
            while active.count < policy.concurrency, !waiting.isEmpty {
                let t = waiting.removeFirst()
                if let easy = startAttempt(t, multi: m) { active[easy] = t }
            }
            var running: Int32 = 0
            curl_multi_perform(m, &running)
            var queued: Int32 = 0
            while let msg = curl_multi_info_read(m, &queued) {
                var easy: UnsafeMutableRawPointer?
                var code = CURLE_OK
                guard ccurl_msg_done(msg, &easy, &code) == 1, let easy, let t = active.removeValue(forKey: easy) else { continue }
                curl_multi_remove_handle(m, easy)
                switch finish(t, code: code) {
                case .done(let result):
                    cleanup(t)
                    t.completion(result)
                case .redirect(let target):
                    cleanup(t)
                    t.redirects += 1
                    t.url = target
                    t.resetForHop()
                    if let easy = start(t, multi: m) { active[easy] = t }
                case .retry:
                    cleanup(t)
                    let delay = policy.backoffBase.inSeconds * pow(2, Double(t.attempts - 1)) * Double.random(in: 0.5...1.5)
                    delayed.append((Clock.instant(after: .clampedSeconds(delay)), t))
                }
            }
            // Sleep until curl's own next timer, a retry's due time, or a wakeup;
            // never long while anything is pending.
            var curlTimeout = -1
            curl_multi_timeout(m, &curlTimeout)
            var timeout: Int = active.isEmpty && waiting.isEmpty ? 1000 : 100
            if curlTimeout >= 0 { timeout = min(timeout, curlTimeout) }
            // Slots freed by transfers that just finished: start the queued ones now.
            if !waiting.isEmpty && active.count < policy.concurrency { timeout = 0 }
            if let next = delayed.map(\.due).min() {
                timeout = min(timeout, Int(Clock.elapsed(since: Clock.monotonicNanoseconds(), now: next).millisecondsRoundedUp))
            }
            curl_multi_poll(m, nil, 0, Int32(timeout), nil)
        }
    }

    /// Starts a new attempt at the request's URL; nil when it failed at once.
    private func startAttempt(_ t: Transfer, multi m: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        t.attempts += 1
        t.resetForAttempt()
        if t.attempts > 1 {
            do { try t.sink.reset() } catch {
                t.completion(.failure(.rejected(url: t.request.url, reason: "\(error)")))
                return nil
            }
        }
        return start(t, multi: m)
    }

    /// libcurl's receive buffer for each transfer, as curl's own command
    /// line sets it (100 KiB; libcurl's default is 16): over plain HTTP a
    /// body is read from the socket in a fifth as many calls (a prefetch of
    /// 1,100 images: 4,263 `recvfrom`, was 20,060). The sink still gets it
    /// in pieces of at most 16 KiB (`CURL_MAX_WRITE_SIZE`), and TLS or a
    /// compressed body are read a record or a piece at a time whatever the
    /// buffer. At most `concurrency` transfers hold one (easy handles exist
    /// only while active).
    static let receiveBuffer = 100 << 10

    /// Starts the hop to `t.url`; nil when it failed at once.
    private func start(_ t: Transfer, multi m: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        guard let easy = curl_easy_init() else {
            t.completion(.failure(.transfer(url: t.request.url, message: "curl_easy_init failed", attempts: t.attempts)))
            return nil
        }
        t.easy = easy
        let me = Unmanaged.passUnretained(t).toOpaque()
        ccurl_setopt_string(easy, CURLOPT_URL, t.url)
        ccurl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        // No CURLOPT_FOLLOWLOCATION: `finish` follows redirects (see the type's doc).
        ccurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(policy.connectTimeout.millisecondsRoundedUp))
        ccurl_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(policy.totalTimeout.millisecondsRoundedUp))
        ccurl_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        ccurl_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, Int(max(1, policy.lowSpeedTime.wholeSeconds)))
        ccurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        ccurl_setopt_long(easy, CURLOPT_BUFFERSIZE, Self.receiveBuffer)
        // No CURLOPT_PIPEWAIT: with HTTP/1.1 origins (which never confirm
        // multiplexing) curl 7.88 parked such transfers until the next timeout.
        ccurl_setopt_string(easy, CURLOPT_USERAGENT, policy.userAgent)
        ccurl_setopt_string(easy, CURLOPT_ACCEPT_ENCODING, "")
        if let caFile = policy.caFile {
            ccurl_setopt_string(easy, CURLOPT_CAINFO, caFile)
            ccurl_setopt_string(easy, CURLOPT_PROXY_CAINFO, caFile)
        }
        if let caPath = policy.caPath {
            ccurl_setopt_string(easy, CURLOPT_CAPATH, caPath)
            ccurl_setopt_string(easy, CURLOPT_PROXY_CAPATH, caPath)
        }
        if let proxy = policy.proxy { ccurl_setopt_string(easy, CURLOPT_PROXY, proxy) }
        if let noProxy = policy.noProxy { ccurl_setopt_string(easy, CURLOPT_NOPROXY, noProxy) }
        if let limit = t.request.maxBodySize { ccurl_setopt_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(limit)) }
        ccurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, t.errorBuffer)
        ccurl_setopt_callback(easy, CURLOPT_WRITEFUNCTION, writeCallback)
        ccurl_setopt_pointer(easy, CURLOPT_WRITEDATA, me)
        ccurl_setopt_callback(easy, CURLOPT_HEADERFUNCTION, headerCallback)
        ccurl_setopt_pointer(easy, CURLOPT_HEADERDATA, me)
        t.headerList = headerList(t)
        if let list = t.headerList { ccurl_setopt_pointer(easy, CURLOPT_HTTPHEADER, list) }
        // The header list goes to the origin only, never in a proxy's CONNECT.
        ccurl_setopt_long(easy, CURLOPT_HEADEROPT, Int(CURLHEADER_SEPARATE))
        curl_multi_add_handle(m, easy)
        return easy
    }

    /// The request's own headers on every hop, and the configured
    /// credentials on a hop they may go to (`FetchCredentials`); a
    /// configured header replaces the request's of the same name (a
    /// `fetch-header` of `Accept` replaces the feeds' default one).
    private func headerList(_ t: Transfer) -> UnsafeMutablePointer<curl_slist>? {
        var list: UnsafeMutablePointer<curl_slist>?
        let granted = credentials.headers(for: URLOrigin(t.url), first: t.firstOrigin)
        let replaced = Set(granted.map { $0.name.lowercased() })
        for h in t.request.headers {
            let name = h.split(separator: ":", maxSplits: 1).first.map { $0.lowercased() } ?? ""
            if !replaced.contains(name) { list = curl_slist_append(list, h) }
        }
        for h in granted { list = curl_slist_append(list, h.line) }
        t.credentialNames = granted.map(\.name)
        return list
    }

    private enum Outcome {
        case done(Result<HTTPResponse, FetchError>)
        case retry
        /// Follow the hop's redirect to this URL.
        case redirect(String)
    }

    private func finish(_ t: Transfer, code: CURLcode) -> Outcome {
        guard t.easy != nil else { return .done(.failure(.transfer(url: t.request.url, message: "no handle", attempts: t.attempts))) }
        let status = t.status
        let url = t.request.url
        let canRetry = t.attempts <= policy.retries
        if let reason = t.sinkError {
            return .done(.failure(.rejected(url: url, reason: reason)))
        }
        // A redirect whose body was cut short on purpose is followed all the same.
        if code == CURLE_OK || (code == CURLE_WRITE_ERROR && t.isRedirect), let target = t.redirectTarget {
            return follow(t, to: target)
        }
        if let bad = t.badStatus ?? ((status >= 400 && code == CURLE_OK) ? status : nil) {
            if bad >= 500 && canRetry { return .retry }
            let use = bad == 401 || bad == 403 ? credentialUse(t) : nil
            return .done(.failure(.status(url: url, code: bad, attempts: t.attempts, credentials: use)))
        }
        if code == CURLE_FILESIZE_EXCEEDED, let limit = t.request.maxBodySize {
            return .done(.failure(.rejected(url: url, reason: "larger than \(t.request.maxBodySetting) \(formatSize(limit))")))
        }
        guard code == CURLE_OK else {
            let detail = String(cString: t.errorBuffer)
            let curlMessage = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            let message = TransferFailure.explain(code: code, message: curlMessage, policy: policy)
            if isTransient(code) && canRetry { return .retry }
            return .done(.failure(.transfer(url: url, message: message, attempts: t.attempts)))
        }
        return .done(.success(HTTPResponse(status: status, headers: t.headers, bodyBytes: t.bodyBytes, attempts: t.attempts, url: t.url)))
    }

    /// The next hop, or why there is none: at most `maxRedirects`, only to http or https.
    private func follow(_ t: Transfer, to target: String) -> Outcome {
        guard HTTPClient.isFetchable(target) else {
            let scheme = target.split(separator: ":", maxSplits: 1).first.map { String($0.prefix(20)) } ?? ""
            return .done(.failure(.transfer(url: t.request.url, message: "redirected to a URL of another protocol (\(scheme)://); only http and https are followed",
                                            attempts: t.attempts)))
        }
        guard t.redirects < policy.maxRedirects else {
            return .done(.failure(.transfer(url: t.request.url, message: "too many redirects (max-redirects \(policy.maxRedirects))",
                                            attempts: t.attempts)))
        }
        return .redirect(target)
    }

    /// What a refused hop carried of the configured credentials.
    private func credentialUse(_ t: Transfer) -> CredentialUse {
        if !t.credentialNames.isEmpty { return .sent(names: t.credentialNames) }
        let hop = URLOrigin(t.url)
        let shown = hop?.description ?? t.url
        let configured = credentials
        if hop != t.firstOrigin && (configured.apply(to: t.firstOrigin) || configured.apply(to: hop)) {
            return .withheldAfterRedirect(origin: shown)
        }
        return .noneConfigured(origin: shown)
    }

    private func isTransient(_ code: CURLcode) -> Bool {
        switch code {
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_OPERATION_TIMEDOUT, CURLE_RECV_ERROR,
             CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING, CURLE_SSL_CONNECT_ERROR, CURLE_HTTP2,
             CURLE_HTTP2_STREAM:
            return true
        default:
            return false
        }
    }

    private func cleanup(_ t: Transfer) {
        if let easy = t.easy { curl_easy_cleanup(easy) }
        t.easy = nil
        if let list = t.headerList { curl_slist_free_all(list) }
        t.headerList = nil
    }
}
