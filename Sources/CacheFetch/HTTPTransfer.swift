import CCurl
import CacheSystem

/// One transfer in flight. Touched only by the fetch thread until completion.
///
/// A transfer makes one or more attempts (retries); an attempt makes one
/// or more hops (redirects, which `HTTPClient` follows itself so that the
/// configured credentials are decided per hop). Each hop is a fresh easy handle.
final class Transfer {
    let request: HTTPRequest
    let sink: BodySink
    let completion: @Sendable (Result<HTTPResponse, FetchError>) -> Void
    /// The origin the request begins at: the only one that may get credentials.
    let firstOrigin: URLOrigin?
    var attempts = 0
    /// This hop's URL: the request's, then each redirect's target.
    var url: String
    /// Redirects followed in this attempt.
    var redirects = 0
    /// The configured header names sent on this hop.
    var credentialNames: [String] = []
    var easy: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    var headers: [String: String] = [:]
    var sinkError: String?
    var statusChecked = false
    var badStatus: Int?
    /// This hop answered a redirect: its body is read and dropped.
    var isRedirect = false
    var discardedBytes = 0
    var bodyBytes: Int64 = 0
    /// curl writes its error text here after the setopt call returns, so it needs a stable address.
    let errorBuffer: UnsafeMutablePointer<CChar> = {
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        p.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        return p
    }()

    /// The most of a redirect's body read (and dropped) to keep its
    /// connection for reuse; past it the connection is closed instead.
    static let maxRedirectBody = 64 << 10

    deinit { errorBuffer.deallocate() }

    init(request: HTTPRequest, sink: BodySink, completion: @escaping @Sendable (Result<HTTPResponse, FetchError>) -> Void) {
        self.request = request
        self.sink = sink
        self.completion = completion
        url = request.url
        firstOrigin = URLOrigin(request.url)
    }

    /// A new attempt starts again at the request's URL.
    func resetForAttempt() {
        url = request.url
        redirects = 0
        resetForHop()
    }

    /// What one hop's response leaves behind.
    func resetForHop() {
        errorBuffer[0] = 0
        headers = [:]
        sinkError = nil
        statusChecked = false
        badStatus = nil
        isRedirect = false
        discardedBytes = 0
        bodyBytes = 0
        credentialNames = []
    }

    /// The status of this hop's response (0 before one arrived).
    var status: Int {
        var status = 0
        if let easy { ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) }
        return status
    }

    /// Where this hop's response redirects to (its `Location`, resolved
    /// by libcurl against the hop's URL), when it is a redirect: a 3xx
    /// other than 304 with a Location.
    var redirectTarget: String? {
        let code = status
        guard (300...399).contains(code), code != 304, let easy else { return nil }
        var target: UnsafeMutableRawPointer?
        guard ccurl_getinfo_pointer(easy, CURLINFO_REDIRECT_URL, &target) == CURLE_OK, let target else { return nil }
        return String(cString: target.assumingMemoryBound(to: CChar.self))
    }
}

let writeCallback: ccurl_data_cb = { data, size, count, userdata in
    guard let userdata, let data else { return 0 }
    let t = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    let n = size * count
    if !t.statusChecked {
        t.statusChecked = true
        let status = t.status
        if t.redirectTarget != nil {
            t.isRedirect = true
        } else if status >= 300 || status < 200 {
            // An error page is not the body we asked for: stop reading it.
            t.badStatus = status
            return 0
        }
    }
    if t.isRedirect {
        // A redirect's body is nobody's; read to the end, the connection stays usable.
        t.discardedBytes += n
        return t.discardedBytes <= Transfer.maxRedirectBody ? n : 0
    }
    do {
        try t.sink.receive(UnsafeRawBufferPointer(start: data, count: n))
    } catch {
        t.sinkError = "\(error)"
        return 0
    }
    t.bodyBytes += Int64(n)
    return n
}

let headerCallback: ccurl_data_cb = { data, size, count, userdata in
    guard let userdata, let data else { return 0 }
    let t = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    let n = size * count
    let line = UnsafeRawBufferPointer(start: data, count: n)
    if line.starts(with: "HTTP/".utf8) {
        t.headers = [:]  // a new response (after a 100-continue)
    } else if let field = HeaderField.parse(line) {
        t.headers[field.name] = field.value
    }
    return n
}
