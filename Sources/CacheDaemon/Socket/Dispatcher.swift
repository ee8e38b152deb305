import CacheProtocol
import CacheService
import CacheSystem

/// Translates each JSON-lines request into a call of the service API and
/// its result into an answer line: nothing else. Runs on the loop thread;
/// answers that come later are posted through the `Reply`.
final class Dispatcher: Sendable {
    let service: CacheService
    let socketPath: String

    init(service: CacheService, socketPath: String) {
        self.service = service
        self.socketPath = socketPath
    }

    func handle(_ request: Request, _ reply: Reply) -> Answer {
        let tag = request.tag
        switch request.command {
        case .ping:
            return .now(AnswerEncoding.ping(tag: tag))
        case .status:
            return .now(AnswerEncoding.status(service.status(), socket: socketPath, tag: tag))
        case .getPost(let id):
            return now(service.post(id: id), tag) { Response.ok(tag: tag, id: $0.id, name: "post", rawJSON: $0.json) }
        case let .listPosts(offset, limit, query):
            let encode = { @Sendable (page: PostsPage) in AnswerEncoding.posts(page, tag: tag) }
            return answer(service.posts(offset: offset, limit: limit, query: query, then: finish(reply, encode)), tag, encode)
        case let .getImage(row, fetch, variant):
            let encode = { @Sendable (entry: ImageEntry) in AnswerEncoding.image(entry, tag: tag) }
            if let variant { return answer(service.imageVariant(row: row, variant, then: finish(reply, encode)), tag, encode) }
            return answer(service.image(row: row, fetch: fetch, then: finish(reply, encode)), tag, encode)
        case let .listImages(offset, limit):
            let encode = { @Sendable (page: ImagesPage) in AnswerEncoding.images(page, tag: tag) }
            return answer(service.images(offset: offset, limit: limit, then: finish(reply, encode)), tag, encode)
        case .read(let hex):
            return read(hex, reply)
        case .open(let hex):
            return open(hex, reply)
        case let .prefetch(what, force, progress):
            service.prefetch(PrefetchScope(what), force: force, progress: { p in
                if progress { reply.send(AnswerEncoding.progress(p, tag: tag)) }
            }, then: finish(reply) { AnswerEncoding.prefetch($0, tag: tag) })
            return .later
        case .verify:
            service.verify { reply.finish(AnswerEncoding.verify($0, tag: tag)) }
            return .later
        case .gc:
            service.collectGarbage(then: finish(reply) { AnswerEncoding.garbage($0, tag: tag) })
            return .later
        case .compact:
            service.compact(then: finish(reply) { AnswerEncoding.compaction($0, tag: tag) })
            return .later
        }
    }

    private func read(_ hex: String, _ reply: Reply) -> Answer {
        let tag = reply.tag
        let body: (ObjectBody) -> Answer = { body in
            switch body {
            case .inline(let bytes): return .now(bytes)
            case let .file(prefix, fd, size): return .nowFile(prefix, fd, length: size)
            }
        }
        let outcome = service.object(hash: hex, prefix: { AnswerEncoding.objectHeader(size: $0, tag: tag) }) { [self] result in
            switch result {
            case .success(.inline(let bytes)): reply.finish(bytes)
            case let .success(.file(prefix, fd, size)): reply.finish(header: prefix, file: fd, size: size)
            case .failure(let e): reply.finish(error(e, tag))
            }
        }
        switch outcome {
        case .later: return .later
        case .now(.success(let b)): return body(b)
        case .now(.failure(let e)): return .now(error(e, tag))
        }
    }

    /// `open`: the answer line, with the verified descriptor passed along.
    private func open(_ hex: String, _ reply: Reply) -> Answer {
        let tag = reply.tag
        let outcome = service.openObject(hash: hex) { [self] result in
            switch result {
            case .success(let file): reply.finish(AnswerEncoding.opened(size: file.size, tag: tag), passing: file.descriptor)
            case .failure(let e): reply.finish(error(e, tag))
            }
        }
        switch outcome {
        case .later: return .later
        case .now(.success(let file)): return .nowPassing(AnswerEncoding.opened(size: file.size, tag: tag), file.descriptor)
        case .now(.failure(let e)): return .now(error(e, tag))
        }
    }

    /// The answer for an outcome: its line now, or later through the completion.
    private func answer<V>(_ outcome: Outcome<V>, _ tag: [UInt8]?, _ encode: (V) -> [UInt8]) -> Answer {
        switch outcome {
        case .now(let result): return now(result, tag, encode)
        case .later: return .later
        }
    }

    private func now<V>(_ result: Result<V, CacheError>, _ tag: [UInt8]?, _ encode: (V) -> [UInt8]) -> Answer {
        switch result {
        case .success(let v): return .now(encode(v))
        case .failure(let e): return .now(error(e, tag))
        }
    }

    /// A completion that finishes `reply` with the encoded result or the error.
    private func finish<V>(_ reply: Reply, _ encode: @escaping @Sendable (V) -> [UInt8]) -> Completion<V> {
        { [self] result in
            switch result {
            case .success(let v): reply.finish(encode(v))
            case .failure(let e): reply.finish(error(e, reply.tag))
            }
        }
    }

    /// An error line, counted as an error answer (a prefetch that failed in
    /// part carries what it did).
    private func error(_ e: CacheError, _ tag: [UInt8]?) -> [UInt8] {
        service.noteRequests(0, errors: 1)
        if case .partialPrefetch(let done, _) = e { return AnswerEncoding.prefetchFailure(done, ProtocolError(e), tag: tag) }
        return Response.error(ProtocolError(e), tag: tag)
    }
}

extension PrefetchScope {
    init(_ target: PrefetchTarget) {
        switch target {
        case .all: self = .all
        case .posts: self = .posts
        case .images: self = .images
        }
    }
}
