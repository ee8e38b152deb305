#if canImport(Glibc)
import Glibc
#endif
import CacheDaemon
import CacheDaemonHarness
import CacheHTTP
import CacheService
import CacheProtocol
import CacheStore
import CacheSystem

/// The fuzz targets. Each takes arbitrary bytes and must neither crash nor
/// hang; where two paths must agree, a disagreement traps so that the fuzzer
/// reports it.
/// A parser's error on arbitrary bytes is the expected outcome, not a
/// finding: the `try?` in the targets discard those errors on purpose.
enum FuzzTargets {
    /// A dispatcher over a small real store, created once per process. A
    /// store that cannot be made ends the run with why: a fuzzer that
    /// silently skipped the dispatcher would report a clean run of less.
    nonisolated(unsafe) static var harness: DispatchHarness? = {
        var template = Array("/tmp/cached-fuzz-XXXXXX".utf8CString)
        guard let dir = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }).map({ String(cString: $0) }) else {
            setUpFailed("mkdtemp /tmp/cached-fuzz-XXXXXX: \(String(cString: strerror(errno)))")
        }
        do {
            try seed(dir)
            return try DispatchHarness(directory: dir)
        } catch {
            setUpFailed("a store in \(dir): \(error)")
        }
    }()

    /// Ends the process: the dispatcher's store could not be made.
    static func setUpFailed(_ why: String) -> Never {
        var line = Array("cached-fuzz: cannot set up the dispatcher: \(why)\n".utf8)
        _ = line.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
        exit(70)  // EX_SOFTWARE
    }

    /// A few posts and rows, with no origin configured, so nothing is ever fetched.
    static func seed(_ directory: String) throws(StoreError) {
        let store = try Store(StoreConfiguration(directory: directory))
        defer { store.close() }
        _ = try store.replacePosts((1...5).map { (PostID.int(Int64($0)), Array("{\"id\":\($0),\"title\":\"t\"}".utf8)) },
                                   pages: [FeedPage(url: "", count: 5)])
        try store.replaceManifest([("a.png", "A"), ("", nil), ("file:///etc/passwd", nil)], pages: [FeedPage(url: "", count: 3)])
    }
    nonisolated(unsafe) static var runs = 0

    /// Request lines as the event loop sees them: framing, the fast and the
    /// general parser (which must agree), the error answer built from a
    /// rejection (which must be one valid JSON line), and the dispatcher's
    /// immediate answers (which must be one JSON line, or a read header).
    static func request(_ data: [UInt8]) {
        runs += 1
        if runs % 1000 == 0 { harness?.drain() }
        var buffer = LineBuffer()
        buffer.append(data)
        while case .line(let line) = buffer.nextLine() {
            let bytes = Array(line)
            let general = Request.parseGeneral(bytes)
            switch Request.parse(bytes) {
            case .success(let r):
                guard case .success(let g) = general, g.command == r.command, g.tag == r.tag else {
                    fuzzFailure("fast and general parsers disagree on \(bytes)")
                }
                if let answer = harness?.handle(bytes) {
                    guard let nl = answer.firstIndex(of: 0x0A), (try? JSONParser.parse(answer[..<nl])) != nil else {
                        fuzzFailure("the dispatcher's answer is not a JSON line: \(answer.prefix(200))")
                    }
                }
            case .failure(let e):
                let answer = Response.error(e.error, tag: e.tag)
                guard answer.last == 0x0A, !answer.dropLast().contains(0x0A),
                      (try? JSONParser.parse(answer.dropLast())) != nil else {
                    fuzzFailure("an error answer is not one JSON line: \(answer)")
                }
            }
        }
    }

    /// HTTP input as a connection's bytes: each head parsed where the last
    /// one (and its body) ended. A head must parse the same alone as with
    /// what follows it; every answer, to a request or to a refused head,
    /// must be one well-formed response whose Content-Length is its body's.
    static func http(_ data: [UInt8]) {
        runs += 1
        if runs % 1000 == 0 { harness?.drain() }
        var offset = 0
        while offset < data.count {
            let rest = Array(data[offset...])
            switch rest.withUnsafeBytes({ HTTPParser.parse($0, limits: HTTPLimits()) }) {
            case .incomplete:
                return
            case .rejected(let r):
                guard [400, 411, 413, 414, 417, 431, 505].contains(r.status.code) else { fuzzFailure("refused with \(r.status.code)") }
                if let harness { checkResponse(harness.rejected(r), head: false, file: false) }
                return
            case let .request(request, length):
                guard length > 0, length <= rest.count else { fuzzFailure("a head of \(length) bytes out of \(rest.count)") }
                let alone = Array(rest[..<length]).withUnsafeBytes { HTTPParser.parse($0, limits: HTTPLimits()) }
                guard alone == .request(request, headLength: length) else { fuzzFailure("a head parses differently alone: \(rest[..<length])") }
                for segment in request.path where segment.contains("/") || segment.contains("\0") || segment == ".." || segment == "." {
                    fuzzFailure("a path segment reached the front-end: \(segment.debugDescription)")
                }
                if let (answer, file) = harness?.handle(request) { checkResponse(answer, head: request.method == .head, file: file) }
                offset += length + request.contentLength
            }
        }
    }

    /// `bytes` is a status line, fields and an empty line, then exactly
    /// Content-Length bytes (none for HEAD, 304, or when a file follows).
    static func checkResponse(_ bytes: [UInt8], head: Bool, file: Bool) {
        let crlf2: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]
        guard bytes.starts(with: Array("HTTP/1.1 ".utf8)),
              let end = (0...(max(0, bytes.count - 4))).first(where: { Array(bytes[$0..<min(bytes.count, $0 + 4)]) == crlf2 }) else {
            fuzzFailure("not an HTTP response: \(bytes.prefix(200))")
        }
        let headText = String(decoding: bytes[..<end], as: UTF8.self)
        let body = bytes.count - end - 4
        let length = headText.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length: ") }
            .flatMap { Int($0.dropFirst(16)) }
        if headText.hasPrefix("HTTP/1.1 304") || headText.contains("text/event-stream") { return }
        guard let length else { fuzzFailure("a response without Content-Length: \(headText)") }
        if (head || file) ? body != 0 : body != length {
            fuzzFailure("Content-Length \(length) but \(body) body bytes: \(headText)")
        }
    }

    /// Log records and replay: decode any payload, replay any file.
    static func record(_ data: [UInt8]) {
        _ = try? RecordCodec.decodePayload(data[...])
        let summary = LogReplay.summary(RecordCodec.fileHeader + data)
        if summary.outcome.validLength > data.count + RecordCodec.fileHeader.count { fuzzFailure("replay kept more than it read") }
        // What a valid prefix re-encodes to must replay to the same state
        // (a transaction of more than LogScanner.heldRecords comes in parts,
        // each re-encoded as a transaction of its own: the same state).
        var reencoded = RecordCodec.fileHeader
        _ = LogScanner.scan(RecordCodec.fileHeader + data) { t in
            for r in t { RecordCodec.encode(r, into: &reencoded) }
            RecordCodec.encode(.commit, into: &reencoded)
        }
        let again = LogReplay.summary(reencoded)
        guard again.posts == summary.posts, again.rows == summary.rows, again.objects == summary.objects else {
            fuzzFailure("re-encoded log replays differently")
        }
    }

    /// The two feed decoders and URL resolution of every manifest row.
    static func feeds(_ data: [UInt8]) {
        // A feed's items are checked unbuilt: `validate` must take what `parse` takes.
        var parsed: JSONError?, validated: JSONError?
        do throws(JSONError) { _ = try JSONParser.parse(data) } catch { parsed = error }
        do throws(JSONError) { try JSONParser.validate(data) } catch { validated = error }
        if parsed != validated { fuzzFailure("validate and parse disagree: \(String(describing: parsed)) against \(String(describing: validated))") }
        // The default shape (an array, or a JSON Feed) and a wrapped one.
        for shape in [FeedShape(prefix: "posts"), FeedShape(prefix: "posts", items: .member("data"), next: .member("next"))] {
            if let posts = try? FeedDecoder.postsPage(data, shape: shape, id: .member("id")) {
                for p in posts.posts where (try? JSONParser.parse(p.json)) == nil {
                    fuzzFailure("a stored post is not valid JSON: \(p.json)")
                }
            }
        }
        // A cursor-paged listing with wrapped items (Reddit's shape): the
        // next request is made of whatever the page says, within bounds.
        if let after = try? JSONPointer("/data/after"), let children = try? JSONPointer("/data/children") {
            let shape = FeedShape(prefix: "posts", items: children, paging: .cursor(CursorPaging(source: .pointer(after), parameter: "after")), item: .member("data"))
            if let page = try? FeedDecoder.postsPage(data, shape: shape, id: .member("id")),
               case .url(let next)? = try? shape.paging.next(after: page.facts, url: "http://origin.test/r.json?limit=5", linkHeader: nil, headers: [:], shape: shape),
               !next.hasPrefix("http://origin.test/r.json?limit=5&after=") {
                fuzzFailure("a cursor made a next request off the first URL: \(next)")
            }
        }
        if let rows = try? FeedDecoder.manifestPage(data, shape: FeedShape(prefix: "images"), fields: ItemFields()).entries {
            for r in rows {
                guard let u = FeedDecoder.resolve(r.url, base: "http://origin.test/images/") else { continue }
                if !(u.lowercased().hasPrefix("http://") || u.lowercased().hasPrefix("https://")) {
                    fuzzFailure("resolved to a non-HTTP URL: \(u)")
                }
                // Read as a browser reads it: no space, control, quote or angle
                // bracket left (curl refuses some, a browser encodes them all;
                // only a host keeps non-ASCII), and nothing encoded twice.
                if u.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: ">") }) {
                    fuzzFailure("resolved URL keeps a byte a browser encodes: \(u)")
                }
                if FeedDecoder.resolve(u, base: "http://origin.test/images/") != u {
                    fuzzFailure("resolving is not idempotent: \(u)")
                }
            }
        }
    }

    /// The configuration file parser, and applying what it accepts.
    static func config(_ data: [UInt8]) {
        guard let text = String(validating: data, as: UTF8.self) else { return }
        guard let entries = try? ConfigFile.parse(text, path: "fuzz.conf") else { return }
        for e in entries where !Settings.keys.contains(e.key) || e.value.isEmpty {
            fuzzFailure("the parser accepted \(e)")
        }
        var settings = Settings()
        try? ConfigFile.apply(entries, path: "fuzz.conf", to: &settings)
    }

    static func run(_ target: String, _ data: [UInt8]) {
        switch target {
        case "request": request(data)
        case "record": record(data)
        case "feeds": feeds(data)
        case "config": config(data)
        case "http": http(data)
        default: fuzzFailure("CACHED_FUZZ_TARGET must be request, record, feeds, config or http, not \(target)")
        }
    }

    static var selected: String {
        getenv("CACHED_FUZZ_TARGET").map { String(cString: $0) } ?? "request"
    }
}

/// Reports a broken invariant: prints it and aborts, which libFuzzer records as a crash.
func fuzzFailure(_ message: String) -> Never {
    var line = Array(("cached-fuzz: " + message + "\n").utf8)
    _ = line.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    abort()
}

/// libFuzzer's entry point.
@_cdecl("LLVMFuzzerTestOneInput")
public func cachedFuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    FuzzTargets.run(FuzzTargets.selected, bytes)
    return 0
}

#if !FUZZING
/// Without libFuzzer: `cached-fuzz TARGET FILE...` runs each file through the
/// target once (the regression check for crashes the fuzzer found).
@main
struct CorpusReplay {
    static func main() {
        let args = Array(CommandLine.arguments.dropFirst())
        guard let target = args.first else {
            print("usage: cached-fuzz request|record|feeds|config FILE|DIR...")
            exit(2)
        }
        var count = 0
        for path in args.dropFirst() {
            for file in files(path) {
                guard let f = fopen(file, "rb") else { continue }
                var bytes: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 65536)
                while true {
                    let n = fread(&chunk, 1, chunk.count, f)
                    if n <= 0 { break }
                    bytes += chunk[0..<n]
                }
                fclose(f)
                FuzzTargets.run(target, bytes)
                count += 1
            }
        }
        print("\(target): \(count) inputs, no crash")
    }

    static func files(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [path] }
        defer { closedir(dir) }
        var out: [String] = []
        while let e = readdir(dir) {
            let name = withUnsafePointer(to: e.pointee.d_name) { $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) } }
            if name != "." && name != ".." { out.append(path + "/" + name) }
        }
        return out.sorted()
    }
}
#endif
