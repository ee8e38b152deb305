import CacheHTTP
import CacheService

/// Image and object bytes over HTTP: verified by the service before any
/// byte is sent, as `read` is; `ETag`, `If-None-Match`, single `Range`s
/// (of an object larger than one chunk: only the chunks the range lies in).
extension HTTPFrontEnd {
    /// `Cache-Control` of `/objects/{hash}`: its bytes never change.
    static let immutable = "public, max-age=31536000, immutable"
    /// `Cache-Control` of `/images/{row}`: a row may name another image
    /// later, so a client revalidates (and gets 304 while it does not).
    static let revalidate = "no-cache"

    /// The answer for the object `info` names: 304 for a matching
    /// `If-None-Match`, 416 for a range past its end, its head alone for
    /// HEAD (nothing read), else its verified bytes, whole or the range.
    /// When the object turns out not to be there, `missing` answers instead
    /// (on a worker then: its answer is sent through `reply`).
    func object(_ info: ObjectInfo, _ request: HTTPRequest, cacheControl: String, _ reply: Reply,
                missing: (@Sendable () -> Answer)? = nil) -> Answer {
        let etag = "\"\(info.hash)\""
        if HTTPConditional.noneMatch(request.ifNoneMatch, etag: etag) {
            return .now(responses.notModified(request, etag: etag, cacheControl: cacheControl))
        }
        let honourRange = HTTPConditional.rangeApplies(ifRange: request.ifRange, etag: etag)
        let rangeHeader = honourRange ? request.range : nil
        let range = HTTPRange.resolve(rangeHeader, size: info.size)
        if case .unsatisfiable = range {
            return .now(responses.error(.rangeNotSatisfiable, .badRequest, "the range is past the object's \(info.size) bytes", request) {
                $0.field("Content-Range", "bytes */\(info.size)")
            })
        }
        if request.method == .head {
            var head = objectHead(info, range, size: info.size, request, cacheControl)
            return .now(head.finish())
        }
        if case let .part(start, length) = range, info.size > CacheService.rangeChunkSize {
            return rangeAnswer(info, start: start, length: length, request, cacheControl, reply, missing: missing)
        }
        return Answering.answer(reply, orMissing(missing, request) { [self] body in objectAnswer(body, info, rangeHeader, request, cacheControl) }) {
            service.object(hash: info.hash, prefix: { _ in [] }, then: $0)
        }
    }

    /// A result as an answer, with `missing`'s answer instead of a `notFound`
    /// when there is one (the object is made or downloaded again).
    private func orMissing<V>(_ missing: (@Sendable () -> Answer)?, _ request: HTTPRequest,
                              _ answer: @escaping @Sendable (V) -> Answer) -> @Sendable (Result<V, CacheError>) -> Answer {
        let plain = respond(request, answer)
        return { result in
            if case .failure(.notFound) = result, let missing { return missing() }
            return plain(result)
        }
    }

    /// A range of an object larger than one chunk: only the chunks it lies
    /// in are verified (on a worker), then the range is sent.
    private func rangeAnswer(_ info: ObjectInfo, start: Int64, length: Int64, _ request: HTTPRequest, _ cacheControl: String,
                             _ reply: Reply, missing: (@Sendable () -> Answer)?) -> Answer {
        Answering.answer(reply, orMissing(missing, request) { [self] part in rangeFile(part, info, request, cacheControl) }) {
            service.objectRange(hash: info.hash, offset: start, length: length, then: $0)
        }
    }

    /// The verified range `part` as a 206.
    private func rangeFile(_ part: VerifiedRange, _ info: ObjectInfo, _ request: HTTPRequest, _ cacheControl: String) -> Answer {
        var head = objectHead(info, .part(start: part.offset, length: part.length), size: part.size, request, cacheControl)
        return .nowFile(head.finish(), part.descriptor, offset: part.offset, length: part.length)
    }

    /// The verified `body` as the answer: whole, or the part `rangeHeader` asks for.
    private func objectAnswer(_ body: ObjectBody, _ info: ObjectInfo, _ rangeHeader: String?, _ request: HTTPRequest,
                              _ cacheControl: String) -> Answer {
        let size: Int64
        switch body {
        case .inline(let bytes): size = Int64(bytes.count)
        case .file(_, _, let s): size = s
        }
        let range = HTTPRange.resolve(rangeHeader, size: size)
        var head = objectHead(info, range, size: size, request, cacheControl)
        switch (body, range) {
        case (.inline(let bytes), .part(let start, let length)):
            return .now(head.finish(body: Array(bytes[Int(start)..<Int(start + length)])))
        case (.inline(let bytes), _):
            return .now(head.finish(body: bytes))
        case (.file(_, let fd, _), .part(let start, let length)):
            return .nowFile(head.finish(), fd, offset: start, length: length)
        case (.file(_, let fd, let size), _):
            return .nowFile(head.finish(), fd, offset: 0, length: size)
        }
    }

    /// The head of an object's answer, without its ending.
    private func objectHead(_ info: ObjectInfo, _ range: HTTPRange, size: Int64, _ request: HTTPRequest,
                            _ cacheControl: String) -> HTTPHead {
        var h: HTTPHead
        switch range {
        case let .part(start, length):
            h = responses.head(.partialContent, request)
            h.field("Content-Range", "bytes \(start)-\(start + length - 1)/\(size)")
            h.field("Content-Length", length)
        default:
            h = responses.head(.ok, request)
            h.field("Content-Length", size)
        }
        h.field("Content-Type", info.mimeType)
        h.field("ETag", "\"\(info.hash)\"")
        h.field("Accept-Ranges", "bytes")
        h.field("Cache-Control", cacheControl)
        // An SVG opened on its own must not run script in this origin.
        h.field("Content-Security-Policy", "sandbox")
        return h
    }
}
