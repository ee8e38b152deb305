import CacheHTTP
import CacheProtocol
import CacheService

/// The mutations over HTTP: only with `http-allow-admin = true`, only as
/// POST, never from a page of another origin (docs/http.md, "Admin").
/// Their answers are the socket's answer lines (docs/protocol.md).
extension HTTPFrontEnd {
    func admin(_ operation: String, _ request: HTTPRequest, _ reply: Reply) -> Answer {
        guard allowAdmin else {
            return .now(fail(.forbidden, .badRequest, "\(operation) is not served over HTTP unless http-allow-admin = true", request))
        }
        guard request.method == .post else {
            return .now(fail(.methodNotAllowed, .badRequest, "\(operation) is a POST", request) { $0.field("Allow", "POST") })
        }
        // A page elsewhere must not be able to make a visitor's browser run
        // maintenance here. Browsers send Origin with every POST; older ones
        // may not with a form's, so a form's body types are refused too (any
        // other type makes a browser ask first, and nothing here says yes).
        if let origin = request.origin, let why = hosts.originRefusal(origin, request) {
            return .now(fail(.forbidden, .badRequest, why, request))
        }
        if let type = request.contentType, Self.formTypes.contains(type) {
            return .now(fail(.forbidden, .badRequest, "a POST with a form's body (\(type)) is refused: send no body", request))
        }
        let answer: @Sendable ([UInt8]) -> [UInt8] = { [responses] line in
            responses.body(.ok, request, type: HTTPResponses.json, line)
        }
        switch operation {
        case "prefetch":
            guard let scope = PrefetchTarget(rawValue: request.query("what") ?? "all") else {
                return .now(fail(.badRequest, .badRequest, "what is all, posts or images", request))
            }
            let force = ["1", "true"].contains(request.query("force") ?? "0")
            return Answering.later(reply, respond(request) { [self] in answer(AnswerEncoding.prefetch(shown($0), tag: nil)) }) {
                service.prefetch(scope, force: force, progress: { _ in }, then: $0)
            }
        case "verify":
            return Answering.later(reply, respond(request) { answer(AnswerEncoding.verify($0, tag: nil)) }) { done in
                service.verify { done(.success($0)) }
            }
        case "gc":
            return Answering.later(reply, respond(request) { answer(AnswerEncoding.garbage($0, tag: nil)) }) { service.collectGarbage(then: $0) }
        default:
            return Answering.later(reply, respond(request) { answer(AnswerEncoding.compaction($0, tag: nil)) }) { service.compact(then: $0) }
        }
    }

    /// What an HTML form may send without a browser asking the server first.
    static let formTypes: Set<String> = ["application/x-www-form-urlencoded", "multipart/form-data", "text/plain"]
}
