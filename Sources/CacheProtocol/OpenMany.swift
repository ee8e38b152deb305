import CacheSystem

/// `open` of many objects in one request (`hashes`, docs/protocol.md "open
/// of many objects"), on the blocking wire client: one answer line with each
/// object's outcome, the descriptors of the objects opened passed with it.
extension Client {
    /// One object's outcome in an `open` of many.
    public enum OpenedObject: Sendable {
        /// The object's file, read-only at offset 0, checked to be a regular
        /// file of `size` bytes; the caller closes it.
        case file(FileDescriptor, size: Int64)
        /// The daemon could not open this object: `code` is one of the
        /// protocol's error codes (`not_found`, `internal`), `message` why.
        case failed(code: String, message: String)

        /// The descriptor; nil for a failure.
        public var file: FileDescriptor? {
            if case .file(let fd, _) = self { fd } else { nil }
        }

        /// Closes the descriptor, if any.
        public func close() { file?.close() }
    }

    /// The answer to an `open` of many: each object's outcome in the order
    /// asked, or an error answer for the whole request (`bad_request`: an
    /// empty list, too many, a malformed hash; `busy`).
    public enum OpenManyAnswer: Sendable {
        case objects([OpenedObject], answer: JSON)
        case error(JSON)

        /// The answer line, parsed.
        public var answer: JSON {
            switch self {
            case .objects(_, let answer), .error(let answer): answer
            }
        }

        /// Closes every descriptor it holds (an answer nobody takes).
        public func close() {
            if case .objects(let objects, _) = self { for o in objects { o.close() } }
        }
    }

    /// Sends `open` with `hashes` (1 to `Request.maxOpenObjects`) and reads
    /// its answer. Only this request may be in flight: descriptors beyond
    /// those of its line are closed.
    public func open(hashes: [String]) throws(ClientError) -> OpenManyAnswer {
        try send(Request.line(op: "open", [("hashes", .array(hashes.map { .string($0) }))]))
        let answer = try readOpenManyAnswer(hashes: hashes)
        for d in descriptors { d.close() }
        descriptors = []
        return answer
    }

    /// Reads the next line as the answer to an `open` of `hashes` sent
    /// earlier (for a client that pipelines). The answer must name each
    /// hash asked, in order, with a `size` or an `error` with a string
    /// `code`; the objects opened take the oldest descriptors received, one
    /// each, each a regular file of its `size`. Anything else is
    /// `ClientError.malformed`, and the descriptors of this line are closed.
    public func readOpenManyAnswer(hashes: [String]) throws(ClientError) -> OpenManyAnswer {
        let answer = try readJSON()
        guard answer["ok"]?.bool == true else { return .error(answer) }
        let shown = String(decoding: answer.encoded.prefix(200), as: UTF8.self)
        guard let entries = answer["objects"]?.array, entries.count == hashes.count else {
            throw .malformed("an open answer for \(hashes.count) objects without one entry per object: \(shown)")
        }
        var sizes: [Int64?] = []
        sizes.reserveCapacity(entries.count)
        for (i, entry) in entries.enumerated() {
            guard entry["hash"]?.string == hashes[i] else {
                throw .malformed("entry \(i) of an open answer does not name \(hashes[i]), the hash asked for there: \(shown)")
            }
            if let size = entry["size"]?.integer, size >= 0 {
                sizes.append(size)
            } else if entry["error"]?["code"]?.string != nil {
                sizes.append(nil)
            } else {
                throw .malformed("entry \(i) of an open answer has neither a size nor an error code: \(shown)")
            }
        }
        let opened = sizes.reduce(0) { n, s in s == nil ? n : n + 1 }
        if let said = answer["opened"]?.integer, said != Int64(opened) {
            throw .malformed("an open answer that says \(said) objects were opened and lists \(opened): \(shown)")
        }
        guard descriptors.count >= opened else {
            throw .malformed("an open answer for \(opened) objects came with \(descriptors.count) descriptors: \(shown)")
        }
        let passed = Array(descriptors.prefix(opened))
        descriptors.removeFirst(opened)
        var next = 0
        var out: [OpenedObject] = []
        out.reserveCapacity(entries.count)
        for (i, size) in sizes.enumerated() {
            guard let size else {
                let error = entries[i]["error"]
                out.append(.failed(code: error?["code"]?.string ?? "internal", message: error?["message"]?.string ?? "the daemon gave no reason"))
                continue
            }
            let file = passed[next]
            next += 1
            if let problem = PassedFile.problem(file, size: size) {
                for fd in passed { fd.close() }
                throw .malformed("the descriptor passed for \(hashes[i]) (entry \(i) of an open answer) is \(problem)")
            }
            out.append(.file(file, size: size))
        }
        return .objects(out, answer: answer)
    }
}
