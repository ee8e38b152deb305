import CacheHTTP
import CacheService

/// Image and object bytes over HTTP: verified by the service before any
/// byte is sent, as `read` is; `ETag`, `If-None-Match`, single `Range`s
/// (of an object larger than one chunk: only the chunks the range lies in).
/// The service finds and reads the object (`imageBody`, `objectBody`) as
/// `plan` says; this maps what it gives to an answer.
extension HTTPFrontEnd {
    /// `Cache-Control` of `/objects/{hash}`: its bytes never change.
    static let immutable = "public, max-age=31536000, immutable"
    /// `Cache-Control` of `/images/{row}`: a row may name another image
    /// later, so a client revalidates (and gets 304 while it does not).
    static let revalidate = "no-cache"

    /// What an object's answer is, decided once from its info and the
    /// request: 304 for a matching `If-None-Match`, 416 for a range past
    /// its end, its head alone for HEAD (nothing read), else its bytes,
    /// whole or the range (`If-Range` of another ETag: whole).
    enum ObjectPlan: Sendable {
        case notModified
        case unsatisfiable
        case head(HTTPRange)
        case send(HTTPRange)
    }

    /// The plan for `info` and what of it the service reads.
    static func plan(_ info: ObjectInfo, _ request: HTTPRequest) -> (ObjectPlan, BodyRead) {
        let etag = "\"\(info.hash)\""
        if HTTPConditional.noneMatch(request.ifNoneMatch, etag: etag) { return (.notModified, .none) }
        let honourRange = HTTPConditional.rangeApplies(ifRange: request.ifRange, etag: etag)
        let range = HTTPRange.resolve(honourRange ? request.range : nil, size: info.size)
        if case .unsatisfiable = range { return (.unsatisfiable, .none) }
        if request.method == .head { return (.head(range), .none) }
        if case let .part(start, length) = range { return (.send(range), .range(offset: start, length: length)) }
        return (.send(range), .whole)
    }

    /// The bytes of `/images/{row}` and `/objects/{hash}` (found and read
    /// by the service with `plan`) as the answer.
    func objectAnswer(_ body: ImageBody<ObjectPlan>, _ request: HTTPRequest, cacheControl: String) -> Answer {
        let info = body.object
        switch (body.plan, body.content) {
        case (.notModified, _):
            return .now(responses.notModified(request, etag: "\"\(info.hash)\"", cacheControl: cacheControl))
        case (.unsatisfiable, _):
            return .now(responses.error(.rangeNotSatisfiable, .badRequest, "the range is past the object's \(info.size) bytes", request) {
                $0.field("Content-Range", "bytes */\(info.size)")
            })
        case (.head(let range), _):
            var head = objectHead(info, range, request, cacheControl)
            return .now(head.finish())
        case (.send(let range), .part(let part)):
            var head = objectHead(info, range, request, cacheControl)
            return .nowFile(head.finish(), part.descriptor, offset: part.offset, length: part.length)
        case (.send(let range), .whole(let whole)):
            // The range was resolved against the index's size: a body of
            // another size (never, for bytes verified against their name)
            // is refused rather than cut at the wrong place.
            guard Self.size(of: whole) == info.size else {
                if case .file(_, let fd, _) = whole { fd.close() }
                return .now(fail(.internalError, .internal, "object \(info.hash) read as \(Self.size(of: whole)) bytes, not \(info.size)", request))
            }
            var head = objectHead(info, range, request, cacheControl)
            switch (whole, range) {
            case (.inline(let bytes), .part(let start, let length)):
                return .now(head.finish(body: Array(bytes[Int(start)..<Int(start + length)])))
            case (.inline(let bytes), _):
                return .now(head.finish(body: bytes))
            case (.file(_, let fd, _), .part(let start, let length)):
                return .nowFile(head.finish(), fd, offset: start, length: length)
            case (.file(_, let fd, let size), _):
                return .nowFile(head.finish(), fd, offset: 0, length: size)
            }
        case (.send, .none):
            // The service reads what the plan says: this is a bug, answered as one.
            return .now(fail(.internalError, .internal, "object \(info.hash) was not read", request))
        }
    }

    /// The bytes `body` holds.
    static func size(of body: ObjectBody) -> Int64 {
        switch body {
        case .inline(let bytes): Int64(bytes.count)
        case .file(_, _, let size): size
        }
    }

    /// The head of an object's answer, without its ending.
    private func objectHead(_ info: ObjectInfo, _ range: HTTPRange, _ request: HTTPRequest, _ cacheControl: String) -> HTTPHead {
        let size = info.size
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
