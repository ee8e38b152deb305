import CacheProtocol

/// How both Swift clients (and so cachectl) ask for many objects with
/// `open`: in requests of at most `Request.maxOpenObjects` hashes, each
/// answered with every object's own outcome (docs/protocol.md, "open of
/// many objects").
package enum OpenBatches {
    /// `hashes` in order, cut into requests of at most `Request.maxOpenObjects`.
    package static func split(_ hashes: [String]) -> [[String]] {
        stride(from: 0, to: hashes.count, by: Request.maxOpenObjects).map {
            Array(hashes[$0..<min($0 + Request.maxOpenObjects, hashes.count)])
        }
    }

    /// The objects of one request's answer; an error answer for the whole
    /// request (or an answer of another shape) is thrown.
    package static func objects(of answer: WireAnswer) throws(CachedError) -> [Client.OpenedObject] {
        guard case .descriptors(.objects(let objects, _)) = answer else {
            answer.discard()
            throw CachedError(answer: answer.json) ?? CachedError(.malformed, "an open answer of another shape")
        }
        return objects
    }

    /// One object's failure as the clients report it: the daemon's code
    /// (one of the protocol's, else `internal`) and message.
    package static func error(code: String, message: String) -> CachedError {
        CachedError(.daemon(ErrorCode(rawValue: code) ?? .internal), message)
    }
}
