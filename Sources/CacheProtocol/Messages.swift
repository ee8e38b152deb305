import CacheSystem
/// The protocol version this build speaks.
public let protocolVersion = 1

/// The longest request line accepted (docs/protocol.md, "Limits"): 64 KiB.
public let maxRequestLine = 64 * 1024

/// Error codes of protocol version 1 (docs/protocol.md, "Errors"): the one
/// list, which the daemon answers with and the clients read
/// (`CachedError.Code.daemon`).
public enum ErrorCode: String, Sendable, CaseIterable {
    /// The line is not a valid request: not JSON, not an object, an unknown
    /// op, a missing or mistyped argument; or a listing page whose answer
    /// would be longer than a client reads (`ProtocolLimits.maxAnswerLine`).
    case badRequest = "bad_request"
    /// No such post, row or object.
    case notFound = "not_found"
    /// `get_image` with `"fetch": false` on a row that is not cached.
    case notCached = "not_cached"
    /// The origin failed: a feed or image could not be fetched or parsed.
    case upstream
    /// The request line is longer than `maxRequestLine`; the connection is closed.
    case tooLarge = "too_large"
    /// The daemon is at a limit (connections, variants waiting); try later.
    case busy
    /// The daemon could not do it (a full disk, an I/O error); the message says why.
    case `internal`
}

/// A failure to answer a request, as sent on the wire.
public struct ProtocolError: Error, Sendable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { "\(code.rawValue): \(message)" }
}

/// Which feeds a prefetch covers (the protocol's `what`, the service's
/// scope, the client library's `PrefetchScope`: one type).
public enum PrefetchTarget: String, Sendable, CaseIterable {
    case all, posts, images

    /// Whether the posts feed is refreshed.
    public var posts: Bool { self != .images }
    /// Whether the manifest and its images are.
    public var images: Bool { self != .posts }
}

/// A request, validated: every argument present, typed and in range.
public enum Command: Sendable, Equatable {
    case ping
    case status
    case getPost(id: PostID)
    /// `query`: only posts whose title holds it, case-insensitively (nil: every post).
    case listPosts(offset: Int, limit: Int?, query: String? = nil)
    /// `variant`: the row's image resized or converted (docs/protocol.md, "Image variants").
    case getImage(row: Int, fetch: Bool, variant: VariantRequest? = nil)
    case listImages(offset: Int, limit: Int?)
    case read(hash: Hash128)
    /// The object's file as a descriptor passed with the answer line (SCM_RIGHTS).
    case open(hash: Hash128)
    /// `open` with `hashes`: each object's outcome on one answer line, the
    /// descriptors of those opened passed with it, in order (1 to
    /// `Request.maxOpenObjects` hashes, repeats allowed).
    case openMany(hashes: [Hash128])
    case prefetch(what: PrefetchTarget, force: Bool, progress: Bool)
    case verify
    case gc
    case compact
    /// Removes one post (docs/protocol.md, "History").
    case deletePost(id: PostID)
}

/// A parsed request line: the command and the raw JSON text of its tag.
public struct Request: Sendable {
    public var command: Command
    /// The `tag` value's JSON text, echoed verbatim in every response line.
    public var tag: [UInt8]?

    public init(command: Command, tag: [UInt8]? = nil) {
        self.command = command
        self.tag = tag
    }

    /// Parses one line (without its newline). Errors carry the tag when the
    /// line was a JSON object, so that even a rejection can be matched.
    public static func parse(_ line: some Collection<UInt8>, maxDepth: Int = JSONParser.defaultMaxDepth) -> Result<Request, TaggedError> {
        if let fast = line.withContiguousStorageIfAvailable({ FastRequest.parse(UnsafeRawBufferPointer($0)) }), let request = fast {
            return .success(request)
        }
        return parseGeneral(Array(line), maxDepth: maxDepth)
    }

    /// The same for the event loop's lines, not generic: a generic call
    /// across modules is not specialised, and looking up its metadata on
    /// every request cost about 3% of the daemon's time under load.
    public static func parse(_ line: ArraySlice<UInt8>, maxDepth: Int = JSONParser.defaultMaxDepth) -> Result<Request, TaggedError> {
        if let request = line.withUnsafeBytes({ FastRequest.parse($0) }) { return .success(request) }
        return parseGeneral(Array(line), maxDepth: maxDepth)
    }

    /// The general path: the strict parser (at most `maxDepth` levels of
    /// nesting), then per-op validation.
    public static func parseGeneral(_ bytes: [UInt8], maxDepth: Int = JSONParser.defaultMaxDepth) -> Result<Request, TaggedError> {
        let members: [(key: String, value: JSON, range: Range<Int>)]
        do {
            members = try JSONParser.parseObjectMembers(bytes, maxDepth: maxDepth)
        } catch {
            return .failure(TaggedError(ProtocolError(.badRequest, "request is not a JSON object: \(error)"), tag: nil))
        }
        var tag: [UInt8]?
        var fields: [String: JSON] = [:]
        for m in members {
            if m.key == "tag" { tag = JSONParser.minify(bytes[m.range]) }
            fields[m.key] = m.value
        }
        do {
            return .success(Request(command: try command(from: fields), tag: tag))
        } catch {
            return .failure(TaggedError(error, tag: tag))
        }
    }

    private static func command(from f: [String: JSON]) throws(ProtocolError) -> Command {
        guard let opValue = f["op"] else { throw ProtocolError(.badRequest, "missing \"op\"") }
        guard let op = opValue.string else { throw ProtocolError(.badRequest, "\"op\" must be a string") }
        switch op {
        case "ping": return .ping
        case "status": return .status
        case "get_post": return .getPost(id: try postID(f))
        case "list_posts":
            return .listPosts(offset: try count(f, "offset") ?? 0, limit: try count(f, "limit"), query: try query(f))
        case "get_image":
            return .getImage(row: try requiredCount(f, "row"), fetch: try boolean(f, "fetch") ?? true, variant: try variant(f))
        case "list_images":
            return .listImages(offset: try count(f, "offset") ?? 0, limit: try count(f, "limit"))
        case "read": return .read(hash: try hash(f))
        case "open":
            if let many = try hashes(f) { return .openMany(hashes: many) }
            return .open(hash: try hash(f))
        case "prefetch":
            var what = PrefetchTarget.all
            if let w = f["what"], !w.isNull {
                guard let s = w.string, let t = PrefetchTarget(rawValue: s) else {
                    throw ProtocolError(.badRequest, "\"what\" must be one of all, posts, images")
                }
                what = t
            }
            return .prefetch(what: what, force: try boolean(f, "force") ?? false,
                             progress: try boolean(f, "progress") ?? false)
        case "verify": return .verify
        case "gc": return .gc
        case "compact": return .compact
        case "delete_post": return .deletePost(id: try postID(f))
        default:
            throw ProtocolError(.badRequest, "unknown op \"\(op)\"")
        }
    }

    /// The `hash` argument: exactly 32 lowercase hex digits.
    private static func hash(_ f: [String: JSON]) throws(ProtocolError) -> Hash128 {
        guard let h = f["hash"] else { throw ProtocolError(.badRequest, "missing \"hash\"") }
        guard let s = h.string, let hash = Hash128(hex: s) else {
            throw ProtocolError(.badRequest, "\"hash\" must be 32 lowercase hex digits")
        }
        return hash
    }

    /// The most objects one `open` names in `hashes` (docs/protocol.md,
    /// "Limits"): their descriptors count 64 KiB each against
    /// `max-queued-bytes`, so a batch is at most the default's 4 MiB, and
    /// one `sendmsg` passes them all (the kernel's bound is 253).
    public static let maxOpenObjects = 64

    /// `open`'s `hashes`: 1 to `maxOpenObjects` hashes, each 32 lowercase
    /// hex digits; nil when absent or null (then `hash` names one object).
    /// Given with `hash`, it is refused: which of the two was meant is unknown.
    private static func hashes(_ f: [String: JSON]) throws(ProtocolError) -> [Hash128]? {
        guard let v = f["hashes"], !v.isNull else { return nil }
        if let h = f["hash"], !h.isNull { throw ProtocolError(.badRequest, "give \"hash\" (one object) or \"hashes\" (many), not both") }
        guard let list = v.array else { throw ProtocolError(.badRequest, "\"hashes\" must be an array of hashes") }
        guard !list.isEmpty else { throw ProtocolError(.badRequest, "\"hashes\" is empty: name 1 to \(maxOpenObjects) objects") }
        guard list.count <= maxOpenObjects else {
            throw ProtocolError(.badRequest, "\"hashes\" names \(list.count) objects; one request opens at most \(maxOpenObjects)")
        }
        var out: [Hash128] = []
        out.reserveCapacity(list.count)
        for (i, item) in list.enumerated() {
            guard let s = item.string, let hash = Hash128(hex: s) else {
                throw ProtocolError(.badRequest, "\"hashes\"[\(i)] must be 32 lowercase hex digits")
            }
            out.append(hash)
        }
        return out
    }

    /// The `id` of `get_post`: an integer, or a non-empty string of at most 1 KiB.
    private static func postID(_ f: [String: JSON]) throws(ProtocolError) -> PostID {
        guard let v = f["id"] else { throw ProtocolError(.badRequest, "missing \"id\"") }
        if let i = v.integer { return .int(i) }
        if let s = v.string, let id = PostID(string: s) { return id }
        throw ProtocolError(.badRequest, "\"id\" must be an integer or a non-empty string of at most \(PostID.maxStringBytes) bytes")
    }

    /// `list_posts`'s `query`: a string of at most `maxQueryBytes` bytes;
    /// nil when absent, null or empty (every post).
    private static func query(_ f: [String: JSON]) throws(ProtocolError) -> String? {
        guard let v = f["query"], !v.isNull else { return nil }
        guard let s = v.string, s.utf8.count <= maxQueryBytes else {
            throw ProtocolError(.badRequest, "\"query\" must be a string of at most \(maxQueryBytes) bytes")
        }
        return s.isEmpty ? nil : s
    }

    /// `get_image`'s `variant`: an object of `w`, `h` (1 to 65535), `fit`
    /// and `format`, each optional; nil when absent or null. The daemon's
    /// own bounds (`variant-max-dimension`, `variant-sizes`) are the service's.
    private static func variant(_ f: [String: JSON]) throws(ProtocolError) -> VariantRequest? {
        guard let v = f["variant"], !v.isNull else { return nil }
        guard case .object(let members) = v else { throw ProtocolError(.badRequest, "\"variant\" must be an object") }
        var r = VariantRequest()
        var seen: Set<String> = []
        for (key, value) in members {
            guard seen.insert(key).inserted else { throw ProtocolError(.badRequest, "\"variant\".\(key) is given more than once") }
            switch key {
            case "w", "h":
                guard let i = value.integer, i >= 1, i <= 65535 else {
                    throw ProtocolError(.badRequest, "\"variant\".\(key) must be an integer from 1 to 65535")
                }
                if key == "w" { r.width = Int(i) } else { r.height = Int(i) }
            case "fit":
                guard let s = value.string, let fit = VariantFit(name: s) else {
                    throw ProtocolError(.badRequest, "\"variant\".fit must be contain or cover")
                }
                r.fit = fit
            case "format":
                guard let s = value.string, let format = VariantFormat(name: s) else {
                    throw ProtocolError(.badRequest, "\"variant\".format must be one of jpeg, png, webp, avif")
                }
                r.format = format
            default:
                throw ProtocolError(.badRequest, "unknown member \"\(key)\" of \"variant\" (it takes w, h, fit and format)")
            }
        }
        return r
    }

    /// The longest `query` of `list_posts` (and `q` of HTTP's `/posts`): 256 bytes.
    public static let maxQueryBytes = 256

    private static func requiredCount(_ f: [String: JSON], _ name: String) throws(ProtocolError) -> Int {
        guard let c = try count(f, name) else { throw ProtocolError(.badRequest, "missing \"\(name)\"") }
        return c
    }

    /// A non-negative integer argument; nil when absent or null.
    private static func count(_ f: [String: JSON], _ name: String) throws(ProtocolError) -> Int? {
        guard let v = f[name], !v.isNull else { return nil }
        guard let i = v.integer, i >= 0, i <= Int64(Int32.max) else {
            throw ProtocolError(.badRequest, "\"\(name)\" must be a non-negative integer")
        }
        return Int(i)
    }

    private static func boolean(_ f: [String: JSON], _ name: String) throws(ProtocolError) -> Bool? {
        guard let v = f[name], !v.isNull else { return nil }
        guard let b = v.bool else { throw ProtocolError(.badRequest, "\"\(name)\" must be true or false") }
        return b
    }

    /// The request as a JSON line (for clients).
    public static func line(op: String, _ fields: [(String, JSON)] = []) -> [UInt8] {
        var bytes = JSON.object([("op", .string(op))] + fields).encoded
        bytes.append(0x0A)
        return bytes
    }
}

/// A protocol error together with the request's tag.
public struct TaggedError: Error, Sendable {
    public var error: ProtocolError
    public var tag: [UInt8]?
    public init(_ error: ProtocolError, tag: [UInt8]?) {
        self.error = error
        self.tag = tag
    }
}

/// Builds response lines: `{"ok":...,"tag":...,<fields>}\n`.
public enum Response {
    /// A success line; `fill` adds the op's fields.
    public static func ok(tag: [UInt8]?, capacity: Int = 128, _ fill: (inout JSONObjectWriter) -> Void = { _ in }) -> [UInt8] {
        var o = JSONObjectWriter(capacity: capacity + (tag?.count ?? 0))
        o.field("ok", true)
        if let tag { o.field("tag", rawJSON: tag) }
        fill(&o)
        return o.line()
    }

    /// `{"ok":true[,"tag":T],"<name>":<json>}\n` built in one buffer: the hot
    /// answer of get_post, from bytes already encoded.
    /// With `id`, an `"id"` member comes first (get_post's: the id the post is kept by).
    public static func ok(tag: [UInt8]?, id: PostID? = nil, name: StaticString, rawJSON json: [UInt8]) -> [UInt8] {
        json.withUnsafeBytes { ok(tag: tag, id: id, name: name, rawJSON: $0) }
    }

    /// `ok(tag:id:name:rawJSON:)` from bytes lent (a post in the store's arena).
    public static func ok(tag: [UInt8]?, id: PostID? = nil, name: StaticString, rawJSON json: UnsafeRawBufferPointer) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(json.count + name.utf8CodeUnitCount + (tag?.count ?? 0) + 40)
        out.append(contentsOf: #"{"ok":true,"#.utf8)
        if let tag {
            out.append(contentsOf: #""tag":"#.utf8)
            out.append(contentsOf: tag)
            out.append(UInt8(ascii: ","))
        }
        if let id {
            out.append(contentsOf: #""id":"#.utf8)
            switch id {
            case .int(let v): JSONWriter.appendDecimal(v, to: &out)
            case .string:
                var w = JSONWriter(capacity: 32)
                w.postID(id)
                out.append(contentsOf: w.bytes)
            }
            out.append(UInt8(ascii: ","))
        }
        out.append(0x22)
        out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        out.append(contentsOf: #"":"#.utf8)
        out.append(contentsOf: json)
        out.append(contentsOf: "}\n".utf8)
        return out
    }

    /// A failure line; `details` adds members to the `error` object after
    /// its `code` and `message` (a refused listing's `max_limit`), `fill`
    /// members after `error` (a partial prefetch's summary).
    /// `fill` comes before `details` so that a trailing closure is `fill`
    /// (a trailing closure binds to the first closure parameter).
    public static func error(_ e: ProtocolError, tag: [UInt8]?, capacity: Int = 128,
                             _ fill: (inout JSONObjectWriter) -> Void = { _ in },
                             details: (inout JSONObjectWriter) -> Void = { _ in }) -> [UInt8] {
        var o = JSONObjectWriter(capacity: capacity + (tag?.count ?? 0))
        o.field("ok", false)
        if let tag { o.field("tag", rawJSON: tag) }
        var inner = JSONObjectWriter()
        inner.field("code", e.code.rawValue)
        inner.field("message", e.message)
        details(&inner)
        o.field("error", object: inner)
        fill(&o)
        return o.line()
    }

    /// A progress event line of a prefetch.
    public static func progress(tag: [UInt8]?, phase: String, done: Int, total: Int, bytes: Int64) -> [UInt8] {
        var o = JSONObjectWriter()
        o.field("event", "progress")
        if let tag { o.field("tag", rawJSON: tag) }
        o.field("phase", phase)
        o.field("done", done)
        o.field("total", total)
        o.field("bytes", bytes)
        return o.line()
    }
}
