import CacheProtocol
import CacheService
import CacheSystem

/// Translates each JSON-lines request into a call of the service API and
/// its result into an answer line: nothing else. Runs on the loop thread;
/// answers that come later are posted through the `Reply`.
@_spi(Harness) public final class Dispatcher: Sendable {
    let service: CacheService
    let socketPath: String

    /// A dispatcher over `service`; `socketPath` is what `status` says the socket is.
    @_spi(Harness) public init(service: CacheService, socketPath: String) {
        self.service = service
        self.socketPath = socketPath
    }

    /// The answer to `request`: now, or later through `reply`.
    @_spi(Harness) public func handle(_ request: Request, _ reply: Reply) -> Answer {
        let tag = request.tag
        switch request.command {
        case .ping:
            return .now(AnswerEncoding.ping(tag: tag))
        case .status:
            return .now(AnswerEncoding.status(service.status(), socket: socketPath, tag: tag))
        case .getPost(let id):
            // The hot path: the answer written from the stored bytes, no closure made.
            if let line = service.withPost(id: id, { Response.ok(tag: tag, id: $0, name: "post", rawJSON: $1) }) { return .now(line) }
            return .now(error(service.postNotFound(id), tag))
        case let .listPosts(offset, limit, query):
            let encode: @Sendable (PostsPage) -> [UInt8] = { AnswerEncoding.posts($0, tag: tag) }
            let refusal: @Sendable (PostsPage) -> [UInt8]? = { AnswerEncoding.postsRefusal($0, offset: offset, tag: tag) }
            return Answering.listing(reply, respond(tag, encode, unless: refusal),
                                     sized: sized(tag, encode, unless: refusal) { AnswerEncoding.postsSize($0, tag: tag) }) {
                service.posts(offset: offset, limit: limit, query: query, then: $0)
            }
        case let .getImage(row, fetch, variant):
            let encode = respond(tag) { (entry: ImageEntry) in AnswerEncoding.image(entry, tag: tag) }
            if let variant { return Answering.answer(reply, encode) { service.imageVariant(row: row, variant, then: $0) } }
            return Answering.answer(reply, encode) { service.image(row: row, fetch: fetch, then: $0) }
        case let .listImages(offset, limit):
            let encode: @Sendable (ImagesPage) -> [UInt8] = { AnswerEncoding.images($0, tag: tag) }
            let refusal: @Sendable (ImagesPage) -> [UInt8]? = { AnswerEncoding.imagesRefusal($0, offset: offset, tag: tag) }
            return Answering.listing(reply, respond(tag, encode, unless: refusal),
                                     sized: sized(tag, encode, unless: refusal) { AnswerEncoding.imagesSize($0, tag: tag) }) {
                service.images(offset: offset, limit: limit, then: $0)
            }
        case .read(let hex):
            return Answering.answer(reply, read(tag)) { service.object(hash: hex, prefix: { AnswerEncoding.objectHeader(size: $0, tag: tag) }, then: $0) }
        case .open(let hex):
            return Answering.answer(reply, respond(tag) { (file: VerifiedFile) in
                .nowPassing(AnswerEncoding.opened(size: file.size, tag: tag), [file.descriptor])
            }) { service.openObject(hash: hex, then: $0) }
        case .openMany(let hashes):
            return Answering.answer(reply, respond(tag) { [self] (results: [Result<VerifiedFile, CacheError>]) in
                openedMany(hashes, results, tag)
            }) { service.openObjects(hashes: hashes, then: $0) }
        case let .prefetch(what, force, progress):
            return Answering.later(reply, respond(tag) { AnswerEncoding.prefetch($0, tag: tag) }) {
                service.prefetch(what, force: force, progress: { p in
                    if progress { reply.send(AnswerEncoding.progress(p, tag: tag)) }
                }, then: $0)
            }
        case .verify:
            return Answering.later(reply, respond(tag) { AnswerEncoding.verify($0, tag: tag) }) { done in
                service.verify { done(.success($0)) }
            }
        case .gc:
            return Answering.later(reply, respond(tag) { AnswerEncoding.garbage($0, tag: tag) }) { service.collectGarbage(then: $0) }
        case .compact:
            return Answering.later(reply, respond(tag) { AnswerEncoding.compaction($0, tag: tag) }) { service.compact(then: $0) }
        case .deletePost(let id):
            return Answering.later(reply, respond(tag) { (deleted: PostID) in Response.ok(tag: tag) { o in
                var w = JSONWriter()
                w.postID(deleted)
                o.field("id", rawJSON: w.bytes)
                o.field("deleted", true)
            } }) {
                service.deletePost(id: id, then: $0)
            }
        }
    }

    /// A listing's page as a `SizedAnswer`: `size` bytes at most, written by
    /// `encode`, refused with a `busy` line; or, when `unless` refuses the
    /// page (its answer would not fit on a client's line), that refusal,
    /// counted as an error answer, and nothing of the page is written.
    private func sized<V: Sendable>(_ tag: [UInt8]?, _ encode: @escaping @Sendable (V) -> [UInt8],
                                    unless refusal: @escaping @Sendable (V) -> [UInt8]?,
                                    _ size: @escaping @Sendable (V) -> Int) -> @Sendable (V) -> SizedAnswer {
        { [self] page in
            let busy: @Sendable (LimitReached) -> [UInt8] = { Response.error(ProtocolError($0), tag: tag) }
            if let line = refusal(page) {
                service.noteRequests(0, errors: 1)
                return SizedAnswer(bytes: line.count, make: { [line] }, refuse: busy)
            }
            return SizedAnswer(bytes: size(page), make: { [encode(page)] }, refuse: busy)
        }
    }

    /// A result as an answer line: `encode` of a success, an error line for a failure.
    private func respond<V>(_ tag: [UInt8]?, _ encode: @escaping @Sendable (V) -> [UInt8]) -> @Sendable (Result<V, CacheError>) -> Answer {
        respond(tag) { (v: V) -> Answer in .now(encode(v)) }
    }

    /// `respond` for a listing answered at once: the refusal of `unless`
    /// (counted as an error answer) instead of `encode` when it refuses the page.
    private func respond<V>(_ tag: [UInt8]?, _ encode: @escaping @Sendable (V) -> [UInt8],
                            unless refusal: @escaping @Sendable (V) -> [UInt8]?) -> @Sendable (Result<V, CacheError>) -> Answer {
        respond(tag) { [self] (v: V) -> Answer in
            guard let line = refusal(v) else { return .now(encode(v)) }
            service.noteRequests(0, errors: 1)
            return .now(line)
        }
    }

    /// A result as an answer: `answer` of a success, an error line for a failure.
    private func respond<V>(_ tag: [UInt8]?, _ answer: @escaping @Sendable (V) -> Answer) -> @Sendable (Result<V, CacheError>) -> Answer {
        { [self] result in
            switch result {
            case .success(let v): return answer(v)
            case .failure(let e): return .now(error(e, tag))
            }
        }
    }

    /// `read`'s answer: the line and the bytes in one buffer, or the line and the file.
    private func read(_ tag: [UInt8]?) -> @Sendable (Result<ObjectBody, CacheError>) -> Answer {
        respond(tag) { (body: ObjectBody) -> Answer in
            switch body {
            case .inline(let bytes): return .now(bytes)
            case let .file(prefix, fd, size): return .nowFile(prefix, fd, length: size)
            }
        }
    }

    /// The answer to `open` with `hashes`: one line, the descriptors of the
    /// objects opened passed with it in order (none: a line alone). Each
    /// object that failed counts as an error answer.
    private func openedMany(_ hashes: [Hash128], _ results: [Result<VerifiedFile, CacheError>], _ tag: [UInt8]?) -> Answer {
        var descriptors: [FileDescriptor] = []
        var outcomes: [(hash: Hash128, result: Result<Int64, ProtocolError>)] = []
        outcomes.reserveCapacity(hashes.count)
        for (hash, result) in zip(hashes, results) {
            switch result {
            case .success(let file):
                descriptors.append(file.descriptor)
                outcomes.append((hash, .success(file.size)))
            case .failure(let e):
                outcomes.append((hash, .failure(ProtocolError(e))))
            }
        }
        let failed = hashes.count - descriptors.count
        if failed > 0 { service.noteRequests(0, errors: failed) }
        let line = AnswerEncoding.opened(outcomes, tag: tag)
        return descriptors.isEmpty ? .now(line) : .nowPassing(line, descriptors)
    }

    /// An error line, counted as an error answer (a prefetch that failed in
    /// part carries what it did).
    private func error(_ e: CacheError, _ tag: [UInt8]?) -> [UInt8] {
        service.noteRequests(0, errors: 1)
        if case .partialPrefetch(let done, _) = e { return AnswerEncoding.prefetchFailure(done, ProtocolError(e), tag: tag) }
        return Response.error(ProtocolError(e), tag: tag)
    }
}
