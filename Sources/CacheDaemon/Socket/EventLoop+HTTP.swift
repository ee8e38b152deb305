import CacheHTTP
import CacheSystem

/// The HTTP connections' side of the loop: request heads parsed from the
/// input, bodies skipped, each request handed to the HTTP front-end and its
/// answer queued in request order, as for JSON lines (docs/http.md).
extension EventLoop {
    func processHTTP(_ c: Connection, _ input: HTTPConnectionInput) {
        assertOnLoopThread()
        guard let http else { close(c); return }
        var requests = 0, errors = 0
        defer {
            if requests > 0 { observer.requests(requests, errors: errors) }
        }
        while !c.closeAfterFlush && !isPaused(c) {
            if input.bodyToSkip > 0 {
                input.bodyToSkip -= input.buffer.consume(input.bodyToSkip)
                if input.bodyToSkip > 0 { waiting(input); return }
            }
            guard input.buffer.mayHoldHead(http.limits) else { waiting(input); return }
            let parsed = input.buffer.withUnread { HTTPParser.parse($0, limits: http.limits) }
            switch parsed {
            case .incomplete:
                waiting(input)
                return
            case .rejected(let rejection):
                requests += 1
                errors += 1
                log.debug("connection \(c.id): \(rejection)")
                c.answerNow(http.rejected(rejection))
                c.closeAfterFlush = true
                return
            case let .request(request, headLength):
                requests += 1
                input.buffer.consume(headLength)
                input.bodyToSkip = request.contentLength
                input.requestSince = nil
                // The client sends its body only after this (answered before
                // the answer, in order, or it would wait and then send the
                // body where the next request should start).
                if request.expectsContinue && request.contentLength > 0 { c.answerNow(http.continueHead) }
                if totals.full && Self.isListing(request) {
                    errors += 1
                    c.answerNow(http.busy(.queuedAnswers(totals.maxBytes)))
                    if !http.keepsAlive(request) { c.closeAfterFlush = true }
                    continue
                }
                let slot = c.nextSlot
                c.nextSlot += 1
                let reply = Reply(mailbox: mailbox, connection: c.id, slot: slot, tag: nil)
                if c.answer(http.handle(request, reply), slot: slot) {
                    // Reading waits for it: an answer's size is known only
                    // once it is made (a listing, an event stream), so one
                    // connection holds at most one that is being made.
                    // (A listing's bytes are counted once a worker sized
                    // it: EventLoop+Listings.swift.)
                    c.unsizedAnswer = slot
                }
                if !http.keepsAlive(request) { c.closeAfterFlush = true }
            }
        }
    }

    /// `/posts` or `/images`: an answer whose size is known only once it is built.
    static func isListing(_ request: HTTPRequest) -> Bool {
        request.path == ["posts"] || request.path == ["images"]
    }

    /// Part of a request (or its body) is here and the rest is awaited:
    /// the request timeout runs from the first byte.
    private func waiting(_ input: HTTPConnectionInput) {
        if input.requestSince == nil && input.holdsPartialRequest { input.requestSince = Clock.monotonicNanoseconds() }
    }

    /// Answers 408 to HTTP connections whose request has been arriving for
    /// too long (a head or body sent a byte at a time), and closes them.
    func timeOutRequests(_ now: UInt64) {
        for c in Array(connections.values) {
            // A connection the loop stopped reading is not late: its client
            // may have sent the whole request, which waits in the kernel.
            guard let input = c.httpInput, let since = input.requestSince, Clock.elapsed(since: since, now: now) > limits.httpRequest,
                  !isPaused(c), let http else { continue }
            log.debug("connection \(c.id): the request did not arrive within \(limits.httpRequest.secondsText) s")
            input.requestSince = nil
            c.answerNow(http.timedOut())
            c.closeAfterFlush = true
            observer.requests(1, errors: 1)
            flush(c)
        }
    }
}
