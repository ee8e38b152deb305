import CCurl
import CacheSystem

/// One transfer in flight. Touched only by the fetch thread until completion.
///
/// A transfer makes one or more attempts (retries); an attempt makes one
/// or more hops (redirects, which `HTTPClient` follows itself so that the
/// configured credentials are decided per hop). Each hop is a fresh easy handle.
final class Transfer {
    let request: FetchRequest
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

    init(request: FetchRequest, sink: BodySink, completion: @escaping @Sendable (Result<HTTPResponse, FetchError>) -> Void) {
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

    /// True when this hop's response is a redirect: a 3xx other than 304
    /// with a `Location`. Known from the headers, before the body.
    var answeredRedirect: Bool {
        let code = status
        return (300...399).contains(code) && code != 304 && headers["location"] != nil
    }

    /// Where this hop's redirect leads: its `Location` resolved against the
    /// hop's URL as libcurl resolves one it follows (any scheme parsed, so
    /// that a refusal can name it). Nil when it is not a redirect or the
    /// Location is not a URL.
    var redirectTarget: String? {
        guard answeredRedirect, let location = headers["location"], let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        let flags = UInt32(CURLU_NON_SUPPORT_SCHEME | CURLU_ALLOW_SPACE | CURLU_URLENCODE)
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK,
              curl_url_set(handle, CURLUPART_URL, location, flags) == CURLUE_OK else { return nil }
        var out: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_URL, &out, 0) == CURLUE_OK, let out else { return nil }
        defer { curl_free(out) }
        return String(cString: out)
    }
}

let writeCallback: ccurl_data_cb = { data, size, count, userdata in
    guard let userdata, let data else { return 0 }
    let t = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    let n = size * count
    if !t.statusChecked {
        t.statusChecked = true
        let status = t.status
        if t.answeredRedirect {
            t.isRedirect = true
        } else if status >= 300 || status < 200 {
            // An error page is not the body we asked for: stop reading it.
            t.badStatus = status
            return 0
        } else if let length = t.headers["content-length"].flatMap({ Int64($0) }) {
            do { try t.sink.expect(length: length) } catch {
                t.sinkError = "\(error)"
                return 0
            }
        }
    }
    if t.isRedirect {
        // A redirect's body is nobody's: read and dropped, so that the
        // connection stays usable; a long one is cut, closing it.
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

/// Response fields whose lines are joined into one list (see `headerCallback`).
private let listFields: Set<String> = ["link", "cache-control", "pragma"]

let headerCallback: ccurl_data_cb = { data, size, count, userdata in
    guard let userdata, let data else { return 0 }
    let t = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    let n = size * count
    let line = UnsafeRawBufferPointer(start: data, count: n)
    if line.starts(with: "HTTP/".utf8) {
        t.headers = [:]  // a new response (after a 100-continue)
    } else if let field = HeaderField.parse(line) {
        // List fields (RFC 9110 5.3) given on several lines are one list:
        // `Link` (RFC 8288) and `Cache-Control`/`Pragma` (a CDN adds its own
        // line beside the app's: a no-store on the first must not be lost).
        // Other fields keep their last line.
        if listFields.contains(field.name), let earlier = t.headers[field.name] { t.headers[field.name] = earlier + ", " + field.value }
        else { t.headers[field.name] = field.value }
    }
    return n
}
