import CacheSystem

/// What `HTTPParser.parse` found at the front of a connection's input.
public enum HTTPParse: Sendable, Equatable {
    /// The head is not complete yet (and within the limits so far).
    case incomplete
    /// A complete head of `headLength` bytes (any body follows it).
    case request(HTTPRequest, headLength: Int)
    /// A head that is refused; the connection closes after the answer.
    case rejected(HTTPRejection)
}

/// The request-head parser: strict where a lax reading could let two
/// parsers (a proxy in front, this one) disagree on where a request ends,
/// as RFC 9112 asks of a server. Whitespace before a header's colon,
/// folded lines, a bare CR, `Transfer-Encoding` and disagreeing
/// `Content-Length`s are refused, not guessed at.
public enum HTTPParser {
    static let cr: UInt8 = 0x0D, lf: UInt8 = 0x0A, sp: UInt8 = 0x20, ht: UInt8 = 0x09, colon: UInt8 = 0x3A

    /// Parses the request head at the start of `bytes`.
    public static func parse(_ bytes: UnsafeRawBufferPointer, limits: HTTPLimits) -> HTTPParse {
        var start = 0
        // RFC 9112, 2.2: empty lines (CRLF or LF) before a request line are
        // ignored; a CR not followed by LF is refused.
        while start < bytes.count {
            if bytes[start] == lf { start += 1; continue }
            guard bytes[start] == cr else { break }
            guard start + 1 < bytes.count else { return .incomplete }
            guard bytes[start + 1] == lf else { return .rejected(HTTPRejection(.badRequest, "a bare CR before the request line")) }
            start += 2
        }
        if start > limits.maxRequestLine { return .rejected(HTTPRejection(.badRequest, "only empty lines where a request line belongs")) }
        guard let lineEnd = find(lf, in: bytes, from: start) else {
            if bytes.count - start > limits.maxRequestLine { return .rejected(tooLongLine(limits)) }
            return .incomplete
        }
        let line = trimCR(bytes, start, lineEnd)
        if line.upperBound - line.lowerBound > limits.maxRequestLine { return .rejected(tooLongLine(limits)) }
        var request: HTTPRequest
        var fields = FieldState()
        do throws(HTTPRejection) { (request, fields.authority) = try requestLine(bytes, line) } catch { return .rejected(error) }

        var position = lineEnd + 1
        while true {
            guard let end = find(lf, in: bytes, from: position) else {
                if bytes.count > limits.maxHeadBytes { return .rejected(tooLargeHead(limits)) }
                return .incomplete
            }
            if end + 1 > limits.maxHeadBytes { return .rejected(tooLargeHead(limits)) }
            let field = trimCR(bytes, position, end)
            position = end + 1
            if field.isEmpty { break }
            fields.count += 1
            if fields.count > limits.maxHeaders {
                return .rejected(HTTPRejection(.headersTooLarge, "more than \(limits.maxHeaders) header fields"))
            }
            do throws(HTTPRejection) { try headerField(bytes, field, into: &request, &fields, limits) } catch { return .rejected(error) }
        }
        if request.minorVersion >= 1 && request.host == nil {
            return .rejected(HTTPRejection(.badRequest, "an HTTP/1.1 request without a Host header"))
        }
        if let host = request.host {
            guard let authority = HTTPAuthority(host) else {
                return .rejected(HTTPRejection(.badRequest, "a Host header that is not a host and an optional port (1 to 65535)"))
            }
            request.authority = authority
        }
        // RFC 9112, 3.2.2: an absolute-form target's authority is the host.
        if let (text, authority) = fields.authority {
            request.host = text
            request.authority = authority
        }
        if fields.close { request.keepAlive = false }
        else if fields.keepAlive { request.keepAlive = true }
        return .request(request, headLength: position)
    }

    /// What the header fields said so far.
    struct FieldState {
        var count = 0
        var close = false
        var keepAlive = false
        var rangeSeen = false
        var lengthSeen = false
        var contentTypeSeen = false
        /// The authority of an absolute-form target, as sent and as read.
        var authority: (String, HTTPAuthority)?
    }

    private static func tooLongLine(_ limits: HTTPLimits) -> HTTPRejection {
        HTTPRejection(.uriTooLong, "request line longer than \(limits.maxRequestLine) bytes")
    }

    private static func tooLargeHead(_ limits: HTTPLimits) -> HTTPRejection {
        HTTPRejection(.headersTooLarge, "request head longer than \(limits.maxHeadBytes) bytes")
    }

    static func find(_ byte: UInt8, in bytes: UnsafeRawBufferPointer, from: Int) -> Int? {
        var i = from
        while i < bytes.count {
            if bytes[i] == byte { return i }
            i += 1
        }
        return nil
    }

    /// The line `start..<lfIndex` without a CR right before the LF.
    static func trimCR(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ lfIndex: Int) -> Range<Int> {
        lfIndex > start && bytes[lfIndex - 1] == cr ? start..<(lfIndex - 1) : start..<lfIndex
    }

    /// `method SP request-target SP HTTP-version`.
    private static func requestLine(_ bytes: UnsafeRawBufferPointer, _ line: Range<Int>) throws(HTTPRejection) -> (HTTPRequest, (String, HTTPAuthority)?) {
        var parts: [Range<Int>] = []
        var partStart = line.lowerBound
        for i in line where bytes[i] == sp {
            parts.append(partStart..<i)
            partStart = i + 1
        }
        parts.append(partStart..<line.upperBound)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }) else {
            throw HTTPRejection(.badRequest, "a request line is a method, a target and a version, one space apart")
        }
        guard parts[0].allSatisfy({ HTTPGrammar.isTokenByte(bytes[$0]) }) else { throw HTTPRejection(.badRequest, "the method is not a token") }
        let minor = try version(bytes, parts[2])
        let methodName = text(bytes, parts[0])
        let method: HTTPRequest.Method
        switch methodName {
        case "GET": method = .get
        case "HEAD": method = .head
        case "POST": method = .post
        default: method = .other(methodName)
        }
        let target = try HTTPTarget.parse(UnsafeRawBufferPointer(rebasing: bytes[parts[1]]))
        var authority: (String, HTTPAuthority)?
        if let text = target.authority {
            guard let a = HTTPAuthority(text) else { throw HTTPRejection(.badRequest, "an absolute URL whose authority is not a host and port") }
            authority = (text, a)
        }
        return (HTTPRequest(method: method, path: target.path, query: target.query, minorVersion: minor, keepAlive: minor >= 1),
                authority)
    }

    /// `HTTP/1.0` is 0, `HTTP/1.1` (and a later 1.x) is 1; another major version: 505.
    private static func version(_ bytes: UnsafeRawBufferPointer, _ r: Range<Int>) throws(HTTPRejection) -> Int {
        let v = Array(bytes[r])
        guard v.count == 8, v.starts(with: Array("HTTP/".utf8)), ASCII.isDigit(v[5]), v[6] == UInt8(ascii: "."), ASCII.isDigit(v[7]) else {
            throw HTTPRejection(.badRequest, "the version is not HTTP/1.0 or HTTP/1.1")
        }
        guard v[5] == UInt8(ascii: "1") else {
            throw HTTPRejection(.versionNotSupported, "HTTP/\(v[5] - 0x30).\(v[7] - 0x30) is not served: use HTTP/1.1")
        }
        return v[7] == UInt8(ascii: "0") ? 0 : 1
    }

    /// One `name: value` line; the fields the front-end uses are kept.
    private static func headerField(_ bytes: UnsafeRawBufferPointer, _ line: Range<Int>, into request: inout HTTPRequest,
                                     _ state: inout FieldState, _ limits: HTTPLimits) throws(HTTPRejection) {
        let first = bytes[line.lowerBound]
        if first == sp || first == ht { throw HTTPRejection(.badRequest, "a folded header line (obsolete line folding)") }
        guard let colon = find(colon, in: UnsafeRawBufferPointer(rebasing: bytes[line]), from: 0).map({ $0 + line.lowerBound }) else {
            throw HTTPRejection(.badRequest, "a header line without a colon")
        }
        let nameRange = line.lowerBound..<colon
        guard !nameRange.isEmpty, nameRange.allSatisfy({ HTTPGrammar.isTokenByte(bytes[$0]) }) else {
            throw HTTPRejection(.badRequest, "a header name that is not a token (whitespace before the colon?)")
        }
        var vs = colon + 1, ve = line.upperBound
        while vs < ve && HTTPGrammar.isWhitespace(bytes[vs]) { vs += 1 }
        while ve > vs && HTTPGrammar.isWhitespace(bytes[ve - 1]) { ve -= 1 }
        for i in vs..<ve where !HTTPGrammar.isFieldValueByte(bytes[i]) {
            throw HTTPRejection(.badRequest, "a control character in the value of a header")
        }
        let name = text(bytes, nameRange).lowercased()
        let value = text(bytes, vs..<ve)
        switch name {
        case "host":
            guard request.host == nil else { throw HTTPRejection(.badRequest, "more than one Host header") }
            request.host = value
        case "content-length":
            guard !value.isEmpty, value.utf8.count <= 18, value.utf8.allSatisfy(ASCII.isDigit), let n = Int(value) else {
                throw HTTPRejection(.badRequest, "Content-Length is not a number")
            }
            if state.lengthSeen && n != request.contentLength { throw HTTPRejection(.badRequest, "Content-Length headers that disagree") }
            state.lengthSeen = true
            if n > limits.maxBody { throw HTTPRejection(.contentTooLarge, "a request body of \(n) bytes; at most \(limits.maxBody) are read") }
            request.contentLength = n
        case "transfer-encoding":
            throw HTTPRejection(.lengthRequired, "Transfer-Encoding in a request is not accepted: send Content-Length")
        case "connection":
            for token in value.split(separator: ",") {
                switch token.trimmingSpaces.lowercased() {
                case "close": state.close = true
                case "keep-alive": state.keepAlive = true
                default: break
                }
            }
        case "if-none-match":
            request.ifNoneMatch = request.ifNoneMatch.map { $0 + ", " + value } ?? value
        case "range":
            // Two Range headers: neither is honoured (the whole is sent).
            request.range = state.rangeSeen ? nil : value
            state.rangeSeen = true
        case "if-range": request.ifRange = try single("If-Range", request.ifRange, value)
        case "origin": request.origin = try single("Origin", request.origin, value)
        case "content-type":
            guard !state.contentTypeSeen else { throw HTTPRejection(.badRequest, "more than one Content-Type header") }
            state.contentTypeSeen = true
            request.contentType = value.split(separator: ";").first.map { String($0.trimmingSpaces).lowercased() }
        case "expect":
            guard !request.expectsContinue else { throw HTTPRejection(.badRequest, "more than one Expect header") }
            guard value.lowercased() == "100-continue" else {
                throw HTTPRejection(.expectationFailed, "Expect: \(value) is not met (only 100-continue is)")
            }
            request.expectsContinue = true
        // Lists: repeated lines are one list (RFC 9110, 5.3).
        case "x-forwarded-proto": request.forwardedProto = request.forwardedProto.map { $0 + ", " + value } ?? value
        case "forwarded": request.forwarded = request.forwarded.map { $0 + ", " + value } ?? value
        default: break
        }
    }

    /// `value`, unless the field (named `name`) was already given: a second
    /// value of a field that takes one is refused, not chosen between.
    private static func single(_ name: String, _ previous: String?, _ value: String) throws(HTTPRejection) -> String {
        guard previous == nil else { throw HTTPRejection(.badRequest, "more than one \(name) header") }
        return value
    }

    static func text(_ bytes: UnsafeRawBufferPointer, _ r: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[r]), as: UTF8.self)
    }

}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return s
    }
}
