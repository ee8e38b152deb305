import Testing
@testable import CacheHTTP

@Suite struct HTTPInputTests {
    func append(_ input: inout HTTPInput, _ text: String) {
        Array(text.utf8).withUnsafeBytes { input.append($0) }
    }

    @Test func aHeadDrippingInIsSearchedOnceAndFoundAtItsEmptyLine() {
        let head = "GET /posts/1 HTTP/1.1\r\nHost: a\r\n\r\n"
        var input = HTTPInput()
        for (i, ch) in head.enumerated() {
            append(&input, String(ch))
            let may = input.mayHoldHead(HTTPLimits())
            #expect(may == (i == head.count - 1), "after \(i + 1) bytes")
        }
        #expect(input.withUnread { HTTPParser.parse($0, limits: HTTPLimits()) } != .incomplete)
        input.consume(head.utf8.count)
        let more = input.mayHoldHead(HTTPLimits())
        #expect(input.count == 0 && !more)
    }

    @Test func bareLineFeedsAndLeadingEmptyLinesCount() {
        var input = HTTPInput()
        append(&input, "GET / HTTP/1.0\n\n")
        do { let r = input.mayHoldHead(HTTPLimits()); #expect(r) }
        var leading = HTTPInput()
        append(&leading, "\r\nGET / HT")
        do { let r = leading.mayHoldHead(HTTPLimits()); #expect(r) }  // parsing says incomplete
        do { let r = leading.mayHoldHead(HTTPLimits()); #expect(!r) }  // and nothing new arrived
        append(&leading, "TP/1.0\r\n\r\n")
        do { let r = leading.mayHoldHead(HTTPLimits()); #expect(r) }
    }

    @Test func pastALimitTheParserIsAskedSoItCanRefuse() {
        let limits = HTTPLimits(maxRequestLine: 16, maxHeadBytes: 64)
        var line = HTTPInput()
        append(&line, "GET /" + String(repeating: "a", count: 20))
        do { let r = line.mayHoldHead(limits); #expect(r) }
        var head = HTTPInput()
        append(&head, "GET / HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: 10))
        do { let r = head.mayHoldHead(limits); #expect(r) }
        var fine = HTTPInput()
        append(&fine, "GET / HTTP/1.1\r\nX: y\r\n")
        do { let r = fine.mayHoldHead(limits); #expect(!r) }
    }
}
