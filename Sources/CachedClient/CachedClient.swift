#if canImport(Glibc)
import Glibc
#endif
import CacheProtocol
import CacheSystem
@_exported import CachedClientCore

/// A client of the `cached` daemon over its socket (docs/protocol.md).
///
/// One connection is shared by every task that calls it: concurrent calls
/// are pipelined and their answers matched in order. A call whose task is
/// cancelled returns `CachedError` `.cancelled` at once; its answer is still
/// read off the connection and dropped, so the others stay in step. After
/// the daemon restarts, the next call connects again.
///
/// ```swift
/// let cached = CachedClient()
/// let post = try await cached.post(id: 1)
/// for row in try await cached.images() where row.isCached { print(row.row, row.description ?? "") }
/// let png = try await cached.imageData(row: 0)
/// ```
public final class CachedClient: Sendable {
    /// The socket this client talks to.
    public let socketPath: String
    private let pipeline: Pipeline

    /// A client of the daemon at `socketPath`: by default the one cachectl
    /// uses (`CACHED_SOCKET`, else the user's daemon, else the system's).
    /// A socket in a directory another user can write is refused
    /// (`unavailable`): they could have put their own in its place.
    ///
    /// - Parameter timeout: seconds the daemon may stay silent; while an
    ///   answer is awaited the client checks it is alive on a second
    ///   connection after each such silence, so long operations (a
    ///   prefetch) are never cut while it is. The calls the daemon answers
    ///   at once (`ping`, `status`, `post`, `posts`) must have their whole
    ///   answer within it. 0: no limit.
    public convenience init(socketPath: String? = nil, timeout: Double = 10) {
        self.init(socketPath: socketPath, timeout: .seconds(timeout, mayTakeLong: true))
    }

    /// The same, with the timeout as a span (`.seconds(10)`, `.milliseconds(500)`; `.zero`: no limit).
    public convenience init(socketPath: String? = nil, timeout: Duration) {
        self.init(socketPath: socketPath, timeout: timeout > .zero ? .whileAlive(timeout) : .none)
    }

    /// With the wire client's own timeout kinds.
    package init(socketPath: String?, timeout: ClientTimeout, checkingDirectory: Bool = true) {
        let path = socketPath ?? DefaultPaths.clientSocket(environment: Environment.current())
        self.socketPath = path
        pipeline = Pipeline(socketPath: path, timeout: timeout, checkingDirectory: checkingDirectory)
    }

    // MARK: Operations

    /// The daemon's version and protocol version (`ping`).
    public func ping() async throws(CachedError) -> (version: String, protocolVersion: Int) {
        let a = try await call("ping", quick: true)
        return (a["version"]?.string ?? "", Int(a["protocol"]?.integer ?? 0))
    }

    /// What the daemon holds and its counters.
    public func status() async throws(CachedError) -> Status {
        try decode(Status.self, try await call("status", quick: true))
    }

    /// Post `id`, as stored.
    /// An integer id also finds a string id of the same spelling, and the
    /// other way round (docs/protocol.md, "Post ids").
    public func post(id: PostID) async throws(CachedError) -> Post {
        let answer = try await call("get_post", [("id", id.integer.map { .number(String($0)) } ?? .string(id.description))], quick: true)
        return try post(answer["post"], key: answer["id"])
    }

    /// Removes one post from the store (one `posts-keep` kept after the feed
    /// dropped it; docs/protocol.md, "History"); returns the id it was kept by.
    public func deletePost(id: PostID) async throws(CachedError) -> PostID {
        let answer = try await call("delete_post", [("id", id.integer.map { .number(String($0)) } ?? .string(id.description))])
        if let i = answer["id"]?.integer { return .int(i) }
        return answer["id"]?.string.flatMap { PostID(string: $0) } ?? id
    }

    /// Posts in list order (ascending ids when every id is an integer, else the feed's) from `offset`, at most `limit` (all by default).
    /// With a `query` (at most 256 bytes), only the posts whose title holds
    /// it, ignoring case: `offset` and `limit` page the matches.
    /// One answer line: a page whose answer would pass 64 MiB is refused
    /// (`.daemon(.badRequest)`); `postPages(query:pageSize:)` reads any number.
    public func posts(offset: Int = 0, limit: Int? = nil, query: String? = nil) async throws(CachedError) -> [Post] {
        let search: [(String, JSON)] = query.map { [("query", .string($0))] } ?? []
        let answer = try await call("list_posts", paging(offset, limit) + search, quick: true)
        guard let posts = answer["posts"]?.array else { throw CachedError(.malformed, "a list_posts answer without posts") }
        let ids = answer["ids"]?.array
        var out: [Post] = []
        out.reserveCapacity(posts.count)
        for (i, p) in posts.enumerated() { out.append(try post(p, key: ids.flatMap { i < $0.count ? $0[i] : nil })) }
        return out
    }

    /// Row `row` of the manifest; downloads its image first when it is not
    /// cached, unless `fetch` is false (then a row not cached is `notCached`).
    public func image(row: Int, fetch: Bool = true) async throws(CachedError) -> ImageRow {
        try decode(ImageRow.self, try await call("get_image", [("row", .number(String(row))), ("fetch", .bool(fetch))])["image"])
    }

    /// Row `row` with a variant of its image: fitted into `width` x `height`
    /// (either may be nil: free, up to the daemon's `variant-max-dimension`),
    /// or covering it when `fit` is `.cover`, as `format` (default: the
    /// original's format when jpeg, png, webp or avif, else webp). Made once
    /// for every client, then stored; `variant` in the answer names it.
    public func image(row: Int, variant: VariantRequest) async throws(CachedError) -> ImageRow {
        var members: [(String, JSON)] = []
        if let w = variant.width { members.append(("w", .number(String(w)))) }
        if let h = variant.height { members.append(("h", .number(String(h)))) }
        if let fit = variant.fit { members.append(("fit", .string(fit.name))) }
        if let format = variant.format { members.append(("format", .string(format.name))) }
        return try decode(ImageRow.self, try await call("get_image", [("row", .number(String(row))), ("variant", .object(members))])["image"])
    }

    /// The verified bytes of a variant of row `row`'s image (made first if it must be).
    public func variantData(row: Int, _ variant: VariantRequest) async throws(CachedError) -> [UInt8] {
        let entry = try await image(row: row, variant: variant)
        guard let hash = entry.variant?.hash else { throw CachedError(.malformed, "the daemon named no variant for row \(row)") }
        return try await read(hash: hash)
    }

    /// The manifest's rows from `offset`, at most `limit` (all by default),
    /// in one answer line (refused past 64 MiB, as `posts` is;
    /// `imagePages(pageSize:)` reads any number).
    public func images(offset: Int = 0, limit: Int? = nil) async throws(CachedError) -> [ImageRow] {
        try decode([ImageRow].self, try await call("list_images", paging(offset, limit))["images"])
    }

    /// The verified bytes of the object named by `hash` (`read`).
    public func read(hash: String) async throws(CachedError) -> [UInt8] {
        let answer = try await send(Request.line(op: "read", [("hash", .string(hash))]), .bytes)
        guard case .bytes(_, let bytes) = answer else { throw CachedError(answer: answer.json) ?? CachedError(.malformed, "no bytes") }
        return bytes
    }

    /// Row `row`'s image bytes, verified (downloaded first if not cached).
    public func imageData(row: Int) async throws(CachedError) -> [UInt8] {
        let entry = try await image(row: row)
        guard let hash = entry.hash else { throw CachedError(.daemon(.notCached), "row \(row) is not cached") }
        return try await read(hash: hash)
    }

    /// Row `row`'s image as a read-only descriptor the daemon verified
    /// (`open`; downloaded first if not cached). Close it when done.
    public func openImage(row: Int) async throws(CachedError) -> ImageFile {
        let entry = try await image(row: row)
        guard let hash = entry.hash else { throw CachedError(.daemon(.notCached), "row \(row) is not cached") }
        let answer = try await send(Request.line(op: "open", [("hash", .string(hash))]), .descriptor)
        guard case let .descriptor(.file(fd, size, _)) = answer else { throw CachedError(answer: answer.json) ?? CachedError(.malformed, "no descriptor") }
        return ImageFile(descriptor: fd.rawValue, size: size, row: entry)
    }

    /// The objects named by `hashes` as read-only descriptors the daemon
    /// verified (`open` of many objects: one request per
    /// `Request.maxOpenObjects` hashes), one outcome per hash in the order
    /// given: the file, or that object's own error (`.daemon(.notFound)`,
    /// `.daemon(.internal)`), never dropped. Close every file. A failure of
    /// the whole call (a malformed hash: `.daemon(.badRequest)`; the
    /// connection) is thrown, and nothing stays open.
    public func openObjects(hashes: [String]) async throws(CachedError) -> [Result<ObjectFile, CachedError>] {
        var out: [Result<ObjectFile, CachedError>] = []
        out.reserveCapacity(hashes.count)
        do throws(CachedError) {
            for batch in OpenBatches.split(hashes) {
                let line = Request.line(op: "open", [("hashes", .array(batch.map { .string($0) }))])
                let objects = try OpenBatches.objects(of: try await send(line, .descriptors(hashes: batch)))
                for (hash, object) in zip(batch, objects) {
                    switch object {
                    case let .file(fd, size): out.append(.success(ObjectFile(descriptor: fd.rawValue, size: size, hash: hash)))
                    case let .failed(code, message): out.append(.failure(OpenBatches.error(code: code, message: message)))
                    }
                }
            }
        } catch {
            for case .success(let file) in out { file.close() }
            throw error
        }
        return out
    }

    /// Refreshes the feeds in `scope` and downloads every image not cached
    /// (every image with `force`): progress events as they come, then the
    /// summary, last. Ending the iteration early stops listening, not the
    /// prefetch (which the daemon finishes for every client).
    public func prefetch(_ scope: PrefetchScope = .all, force: Bool = false) -> AsyncThrowingStream<PrefetchEvent, any Error> {
        AsyncThrowingStream { continuation in
            let line = Request.line(op: "prefetch", [("what", .string(scope.rawValue)), ("force", .bool(force)), ("progress", .bool(true))])
            let waiter = Waiter(.events, onEvent: { event in
                // An event that is not a progress event of this shape (a later
                // daemon's) is skipped: events only inform; the summary is checked.
                if let p = try? JSONTreeDecoder.decode(PrefetchProgress.self, from: event) { continuation.yield(.progress(p)) }
            }) { result in
                switch result.flatMap(Self.checked) {
                case .success(let json):
                    do {
                        continuation.yield(.finished(try JSONTreeDecoder.decode(PrefetchSummary.self, from: json)))
                        continuation.finish()
                    } catch { continuation.finish(throwing: CachedError(.malformed, "a prefetch summary: \(error)")) }
                case .failure(let e): continuation.finish(throwing: e)
                }
            }
            continuation.onTermination = { _ in waiter.finish(.failure(CachedError(.cancelled, "the prefetch's stream was ended"))) }
            // Asked for in a task already cancelled: nothing is sent.
            if Task.isCancelled {
                waiter.finish(.failure(CachedError(.cancelled, "the task was cancelled")))
                return
            }
            pipeline.submit(line, waiter)
        }
    }

    /// Re-hashes every object; corrupt ones are quarantined and downloaded again.
    public func verify() async throws(CachedError) -> VerifyReport {
        try decode(VerifyReport.self, try await call("verify"))
    }

    /// Removes files no record refers to: how many, and the bytes freed.
    public func collectGarbage() async throws(CachedError) -> (removed: Int, freedBytes: Int64) {
        let a = try await call("gc")
        return (Int(a["removed"]?.integer ?? 0), a["freed_bytes"]?.integer ?? 0)
    }

    /// Rewrites the index log with only live records: its records before and after.
    public func compact() async throws(CachedError) -> (before: Int, after: Int) {
        let a = try await call("compact")
        return (Int(a["records_before"]?.integer ?? 0), Int(a["records_after"]?.integer ?? 0))
    }

    // MARK: The wire

    /// One request's answer line, an error answer thrown. `quick`: the
    /// daemon answers it at once (from memory), so the whole answer must
    /// come within the timeout, however it trickles.
    package func call(_ op: String, _ fields: [(String, JSON)] = [], quick: Bool = false) async throws(CachedError) -> JSON {
        let answer = try await send(Request.line(op: op, fields), .line, quick: quick)
        return try Self.checked(answer).get()
    }

    /// One request's answer line as it came, an error answer included (a
    /// listing's walk reads a refusal's `max_limit`).
    package func answer(_ op: String, _ fields: [(String, JSON)], quick: Bool) async throws(CachedError) -> JSON {
        try await send(Request.line(op: op, fields), .line, quick: quick).json
    }

    private func send(_ line: [UInt8], _ shape: AnswerShape, quick: Bool = false,
                      onEvent: @escaping @Sendable (JSON) -> Void = { _ in }) async throws(CachedError) -> WireAnswer {
        let box = Locked<Waiter?>(nil)
        let result: Result<WireAnswer, CachedError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<WireAnswer, CachedError>, Never>) in
                let waiter = Waiter(shape, quick: quick, onEvent: onEvent) { c.resume(returning: $0) }
                box.withLock { $0 = waiter }
                // A task cancelled before its call began sends nothing (a
                // cancelled gc or prefetch must not run).
                if Task.isCancelled {
                    waiter.finish(.failure(CachedError(.cancelled, "the task was cancelled")))
                    return
                }
                pipeline.submit(line, waiter)
            }
        } onCancel: {
            box.withLock { $0 }?.finish(.failure(CachedError(.cancelled, "the task was cancelled")))
        }
        return try result.get()
    }

    private static func checked(_ answer: WireAnswer) -> Result<JSON, CachedError> {
        if let e = CachedError(answer: answer.json) {
            answer.discard()
            return .failure(e)
        }
        return .success(answer.json)
    }

    func decode<T: Decodable>(_ type: T.Type, _ json: JSON?) throws(CachedError) -> T {
        guard let json else { throw CachedError(.malformed, "an answer without the \(T.self) asked for") }
        do { return try JSONTreeDecoder.decode(type, from: json) } catch {
            throw CachedError(.malformed, "cannot read \(T.self) from \(String(decoding: json.encoded.prefix(200), as: UTF8.self)): \(error)")
        }
    }

    /// A post as the answer gives it, its `id` the one the daemon keeps it
    /// by (`key`: the answer's `id` or `ids`); the object's own `id` member,
    /// when it differs (another `posts-id`), is kept in `extra["id"]`.
    func post(_ json: JSON?, key: JSON?) throws(CachedError) -> Post {
        guard let key, case .object(var members)? = json else { return try decode(Post.self, json) }
        let own = members.last { $0.0 == "id" }?.1
        members.removeAll { $0.0 == "id" }
        members.append(("id", key))
        var post = try decode(Post.self, .object(members))
        if let own, own != key { post.extra["id"] = JSONValue(own) }
        return post
    }

    private func paging(_ offset: Int, _ limit: Int?) -> [(String, JSON)] {
        [("offset", .number(String(offset)))] + (limit.map { [("limit", .number(String($0)))] } ?? [])
    }
}
