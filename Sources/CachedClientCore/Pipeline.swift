#if canImport(Glibc)
import Glibc
#endif
import CacheProtocol
import CacheSystem

/// `close(2)`, for a descriptor handed to a library user.
package func closeDescriptor(_ fd: Int32) -> Int32 { Glibc.close(fd) }

/// What a request's answer is made of on the wire.
package enum AnswerShape: Sendable {
    /// One line.
    case line
    /// A `read` header line and, when it is ok, `size` raw bytes.
    case bytes
    /// An `open` line and, when it is ok, the descriptor passed with it.
    case descriptor
    /// The line of an `open` of `hashes` and the descriptors of the objects
    /// it opened.
    case descriptors(hashes: [String])
    /// Progress event lines (passed to the waiter as they come), then the answer line.
    case events
}

/// A complete answer, as read.
package enum WireAnswer: Sendable {
    case line(JSON)
    case bytes(JSON, [UInt8])
    case descriptor(Client.OpenAnswer)
    case descriptors(Client.OpenManyAnswer)

    package var json: JSON {
        switch self {
        case .line(let j), .bytes(let j, _): j
        case .descriptor(let open): open.answer
        case .descriptors(let open): open.answer
        }
    }

    /// Closes the descriptors nobody will take.
    package func discard() {
        switch self {
        case .descriptor(.file(let fd, _, _)): fd.close()
        case .descriptors(let open): open.close()
        default: break
        }
    }
}

/// One request waiting for its answer. `finish` runs exactly once: with the
/// answer, a failure, or `cancelled` when the caller stops waiting (the
/// answer is then still read off the connection, and dropped).
package final class Waiter: Sendable {
    let shape: AnswerShape
    /// A quick call (one the daemon answers at once): its whole answer must
    /// arrive within the pipeline's timeout, counted from `created`.
    let quick: Bool
    let created = Clock.monotonicNanoseconds()
    private let done = Locked(false)
    private let onAnswer: @Sendable (Result<WireAnswer, CachedError>) -> Void
    private let onEvent: @Sendable (JSON) -> Void

    package init(_ shape: AnswerShape, quick: Bool = false, onEvent: @escaping @Sendable (JSON) -> Void = { _ in },
         _ onAnswer: @escaping @Sendable (Result<WireAnswer, CachedError>) -> Void) {
        self.shape = shape
        self.quick = quick
        self.onEvent = onEvent
        self.onAnswer = onAnswer
    }

    func event(_ line: JSON) {
        if !done.withLock({ $0 }) { onEvent(line) }
    }

    package func finish(_ result: Result<WireAnswer, CachedError>) {
        let first = done.withLock { d -> Bool in
            defer { d = true }
            return !d
        }
        if first { onAnswer(result) } else if case .success(let a) = result { a.discard() }
    }
}

/// One connection's requests in flight, in the order they were sent.
final class Link: @unchecked Sendable {
    // Safe: `client` is sent on only under the pipeline's `sending` lock and
    // read from only by this link's one reader thread (sending and reading
    // touch disjoint state of `Client`: its descriptor, and its buffers);
    // `queue` and `readerRunning` are touched only under the pipeline's `state` lock.
    let client: Client
    var queue: [Waiter] = []
    var readerRunning = false
    var broken = false

    init(_ client: Client) { self.client = client }
}

/// One connection to the daemon shared by every caller: requests are
/// written in turn, answers read in the same order by one reader thread per
/// connection (the daemon answers each connection's requests in order), so
/// concurrent callers pipeline. A connection found closed while idle (the
/// daemon restarted) is replaced before the next request; one that breaks
/// with requests in flight fails them (`unavailable`: they may have run).
package final class Pipeline: Sendable {
    let socketPath: String
    let timeout: ClientTimeout
    let checkingDirectory: Bool
    /// With `checkingDirectory`: directories other users own are refused too.
    let requiringOwner: Bool
    /// Held while a request is written (and a connection made): requests
    /// leave whole and in the order of the queue.
    private let sending = Locked((), rank: .clientWriter)
    private let state = Locked<Link?>(nil)

    package init(socketPath: String, timeout: ClientTimeout, checkingDirectory: Bool, requiringOwner: Bool = false) {
        self.socketPath = socketPath
        self.timeout = timeout
        self.checkingDirectory = checkingDirectory
        self.requiringOwner = requiringOwner
    }

    /// Sends `line` and calls `waiter.finish` when its answer is read: by
    /// the connection's reader thread, started if none runs; or, `inline`
    /// and with none running, by the calling thread itself before this
    /// returns (a blocking caller spares the thread).
    package func submit(_ line: [UInt8], _ waiter: Waiter, inline: Bool = false) {
        let reader: Link? = sending.withLock { _ in
            var target: Link
            do throws(CachedError) { target = try currentLink() } catch {
                waiter.finish(.failure(error))
                return nil
            }
            // Appended only to a link still current and whole (its reader
            // may have failed it since `currentLink`): else to a new one.
            var startReader = false
            while true {
                let appended = state.withLock { current -> Bool in
                    guard !target.broken, current === target else { return false }
                    target.queue.append(waiter)
                    startReader = !target.readerRunning
                    target.readerRunning = true
                    return true
                }
                if appended { break }
                do throws(CachedError) { target = try currentLink() } catch {
                    waiter.finish(.failure(error))
                    return nil
                }
            }
            let link = target
            do throws(ClientError) { try link.client.send(line) } catch {
                // Part of the line may have gone: nothing after it can be
                // trusted. The reader (started below if need be) finds the
                // end of the stream and fails everything queued.
                breakLink(link)
            }
            return startReader ? link : nil
        }
        guard let reader else { return }
        if inline { read(reader) } else { startReading(reader) }
    }

    /// The connection to send on: the current one unless it broke or the
    /// daemon closed it while nothing was in flight; else a new one.
    private func currentLink() throws(CachedError) -> Link {
        if let link = state.withLock({ $0 }) {
            let idle = state.withLock { _ in link.queue.isEmpty && !link.broken }
            if idle && Self.isOpen(link.client.descriptor) { return link }
            if !idle && !link.broken { return link }
            state.withLock { if $0 === link { $0 = nil } }
        }
        let client: Client
        do throws(ClientError) {
            client = try Client(socketPath: socketPath, timeout: timeout, checkingDirectory: checkingDirectory, requiringOwner: requiringOwner)
        } catch { throw CachedError(error) }
        let link = Link(client)
        state.withLock { $0 = link }
        return link
    }

    /// False when the peer closed the connection (or it failed): nothing is
    /// in flight on it, so nothing may be waiting to be read either.
    private static func isOpen(_ fd: FileDescriptor) -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd.rawValue, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    /// Marks `link` broken and no longer current, and shuts it down: nothing
    /// more may be sent or read on it, so a late answer to a failed request
    /// never reaches a later one. Its queue stays for its reader to fail.
    private func breakLink(_ link: Link) {
        state.withLock { current in
            link.broken = true
            if current === link { current = nil }
        }
        _ = Glibc.shutdown(link.client.descriptor.rawValue, Int32(SHUT_RDWR))
    }

    /// Reads `link`'s answers on a thread of their own; when no thread can
    /// be created, on the caller's (it waits for them, but they are read).
    private func startReading(_ link: Link) {
        do throws(SystemError) { try Threads.start(name: "cached-client") { [self] in read(link) } } catch { read(link) }
    }

    /// The reader: answers in queue order until the queue is empty (it
    /// starts again with the next request) or the connection fails.
    private func read(_ link: Link) {
        while true {
            guard let waiter = state.withLock({ _ -> Waiter? in
                if let w = link.queue.first { return w }
                link.readerRunning = false
                return nil
            }) else { return }
            do throws(ClientError) {
                let answer = try readAnswer(waiter, from: link.client)
                state.withLock { _ in _ = link.queue.removeFirst() }
                waiter.finish(.success(answer))
            } catch {
                breakLink(link)
                // Broken, it takes no more requests: the queue is complete.
                let failed = state.withLock { _ -> [Waiter] in
                    defer {
                        link.queue = []
                        link.readerRunning = false
                    }
                    return link.queue
                }
                let reason = CachedError(error)
                for w in failed { w.finish(.failure(reason)) }
                return
            }
        }
    }

    /// The total deadline of `waiter`'s answer, for a quick call.
    private func deadline(of waiter: Waiter) -> Deadline? {
        guard waiter.quick, let limit = timeout.limit else { return nil }
        return Deadline(after: limit, from: waiter.created)
    }

    private func readAnswer(_ waiter: Waiter, from client: Client) throws(ClientError) -> WireAnswer {
        client.deadline = deadline(of: waiter)
        switch waiter.shape {
        case .line:
            return .line(try Self.checked(client.readJSON()))
        case .descriptor:
            let open = try client.readOpenAnswer()
            _ = try Self.checked(open.answer)
            return .descriptor(open)
        case .descriptors(let hashes):
            let open = try client.readOpenManyAnswer(hashes: hashes)
            _ = try Self.checked(open.answer)
            return .descriptors(open)
        case .bytes:
            let header = try Self.checked(client.readJSON())
            guard header["ok"]?.bool == true else { return .line(header) }
            return .bytes(header, try Self.payload(of: header, from: client))
        case .events:
            while true {
                let line = try client.readJSON()
                // Any event line (progress, or a kind a later daemon adds)
                // comes before the answer; only a line without one ends it.
                guard line["event"] != nil else { return .line(try Self.checked(line)) }
                waiter.event(line)
            }
        }
    }

    /// `answer` when it is an answer line as docs/protocol.md says: a
    /// boolean `ok` and, when false, an `error` with a string `code`.
    private static func checked(_ answer: JSON) throws(ClientError) -> JSON {
        switch answer["ok"]?.bool {
        case true?: return answer
        case false? where answer["error"]?["code"]?.string != nil: return answer
        case false?: throw .malformed("an error answer without error.code: \(String(decoding: answer.encoded.prefix(200), as: UTF8.self))")
        case nil: throw .malformed("an answer without a boolean ok: \(String(decoding: answer.encoded.prefix(200), as: UTF8.self))")
        }
    }

    /// The bytes after an ok `read` line: at most `ProtocolLimits.maxReadBytes`,
    /// memory growing with the bytes that arrive, not with the size declared.
    private static func payload(of header: JSON, from client: Client) throws(ClientError) -> [UInt8] {
        guard let size = header["size"]?.integer, size >= 0 else {
            throw .malformed("a read answer without a size: \(String(decoding: header.encoded.prefix(200), as: UTF8.self))")
        }
        guard size <= ProtocolLimits.maxReadBytes else {
            throw .malformed("a read answer of \(size) bytes, more than the \(ProtocolLimits.maxReadBytes) this client reads into memory")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(min(size, 1 << 20)))
        do { try client.readBytes(Int(size)) { bytes.append(contentsOf: $0) } } catch let e as ClientError { throw e } catch {
            throw .malformed("\(error)")
        }
        return bytes
    }
}
