#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheSystem

/// Sending what is queued on a connection: bytes, files with `sendfile`,
/// descriptors with `SCM_RIGHTS`, in order; and the epoll interest that
/// follows from what is left to read and to send.
extension EventLoop {
    func flush(_ c: Connection) {
        assertOnLoopThread()
        guard connections[c.id] != nil else { return }
        while let chunk = c.ready.first {
            switch chunk {
            case .bytes(let b):
                let start = Int(c.readyOffset)
                let sent: Int
                do {
                    sent = try b.withBytes { (raw) throws(SystemError) in try UnixSocket.send(c.fd, UnsafeRawBufferPointer(rebasing: raw[start...])) }
                } catch {
                    close(c)  // the client went away mid-answer
                    return
                }
                if sent == 0 { updateInterest(c); return }
                c.lastActivity = Clock.monotonicNanoseconds()
                c.readyOffset += Int64(sent)
                c.queuedBytes -= sent
                if Int(c.readyOffset) == b.count {
                    // Held until it is let go of whole: a chunk partly sent
                    // is all in memory still (a listing of 20 MB with its
                    // first 2 MB in a TCP send buffer counted 18 MB).
                    c.heldBytes -= b.count
                    if b.count >= Memory.largeBody { freedBytes += b.count }
                    c.ready.removeFirst()
                    c.readyOffset = 0
                }
            case .file(let fd, let start, let size):
                if !c.bigSendBuffer {
                    // Objects go out in fewer, larger writes (fewer wakeups of both sides).
                    UnixSocket.setSendBuffer(c.fd, bytes: EventLoop.fileSendBuffer)
                    c.bigSendBuffer = true
                }
                // `readyOffset` counts the bytes of this chunk already sent.
                var position = start + c.readyOffset
                let sent: Int
                do {
                    sent = try UnixSocket.sendFile(c.fd, from: fd, offset: &position, count: Int(min(size - c.readyOffset, EventLoop.maxSendfile)))
                } catch {
                    // The file could not be read (the transfer is cut short:
                    // a client sees fewer bytes than announced, never wrong
                    // ones), or the client went away.
                    // An identity that cannot be read is reported as unknown (nil): the read error is the news.
                    if error.isMediaError { onFileReadError(fd.path, try? fd.identity(), error) }
                    close(c)
                    return
                }
                if sent == 0 && c.readyOffset < size {
                    // Either the socket is full or the file shrank under us.
                    // A size that cannot be read counts as shrunk: the answer is cut short, never wrong.
                    if (try? fd.size()) ?? 0 < start + size { close(c); return }
                    updateInterest(c)
                    return
                }
                let moved = position - (start + c.readyOffset)
                c.queuedBytes -= Int(moved)
                c.readyOffset += moved
                c.lastActivity = Clock.monotonicNanoseconds()
                if c.readyOffset >= size {
                    fd.close()
                    c.descriptors -= 1
                    c.ready.removeFirst()
                    c.readyOffset = 0
                }
            case .descriptors(let fds):
                // The descriptors go with the first byte of the line after
                // them (queued together, never coalesced into earlier bytes);
                // once anything was sent they are gone, and the rest of the
                // line is an ordinary bytes chunk.
                // (Never alone: both are queued in one call; dropped if so.)
                guard c.ready.count > 1, case .bytes(let line) = c.ready[1] else {
                    for fd in fds { fd.close() }
                    c.descriptors -= fds.count
                    c.ready.removeFirst()
                    c.queuedBytes -= Connection.descriptorCost * fds.count
                    continue
                }
                let sent: Int
                do {
                    sent = try line.withBytes { (raw) throws(SystemError) in try UnixSocket.send(c.fd, raw, passing: fds) }
                } catch {
                    // The client went away, or ETOOMANYREFS: this user has more
                    // descriptors in flight than its RLIMIT_NOFILE (docs/protocol.md, "Limits").
                    if error.errno == ETOOMANYREFS { log.warning("connection \(c.id): cannot pass \(fds.count == 1 ? "a descriptor" : "\(fds.count) descriptors"): \(error); closing it") }
                    close(c)
                    return
                }
                if sent == 0 { updateInterest(c); return }
                for fd in fds { fd.close() }
                c.descriptors -= fds.count
                c.ready.removeFirst()
                c.lastActivity = Clock.monotonicNanoseconds()
                c.queuedBytes -= Connection.descriptorCost * fds.count + sent
                c.readyOffset = Int64(sent)
                // The rest of the line, if any, is let go of by the bytes case.
                if sent == line.count { c.ready.removeFirst(); c.readyOffset = 0; c.heldBytes -= line.count }
            }
        }
        process(c)
        if c.ready.isEmpty && c.slots.isEmpty && (c.closeAfterFlush || c.readClosed) {
            close(c)
            return
        }
        updateInterest(c)
    }

    func updateInterest(_ c: Connection) {
        guard connections[c.id] != nil else { return }  // already closed: nothing to watch
        // The end of the client's input (EPOLLRDHUP) is asked for only while
        // reading: it is level-triggered, so a half-close seen while reading
        // is paused would wake the loop on every turn until the pause ends.
        // EPOLLHUP and EPOLLERR are always reported. An HTTP connection
        // asks for it while paused too: its hang-up closes it at once.
        var want: UInt32 = 0
        if !c.readClosed && !c.closeAfterFlush && !isPaused(c) { want |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        else if c.framing == .http && !c.readClosed && !c.closeAfterFlush { want |= EPOLLRDHUP.rawValue }
        if !c.ready.isEmpty { want |= EPOLLOUT.rawValue }
        guard !c.registered || want != c.interest else { return }
        let result = c.registered ? clinux_epoll_mod(epfd, c.fd.rawValue, want, c.id) : clinux_epoll_add(epfd, c.fd.rawValue, want, c.id)
        guard result == 0 else {
            // Not watched, the connection would hang until its idle limit (or
            // for ever, waiting for output): it is closed instead. ENOSPC is
            // the user's fs.epoll.max_user_watches, ENOMEM the kernel's.
            let error = SystemError(c.registered ? "epoll_ctl(EPOLL_CTL_MOD)" : "epoll_ctl(EPOLL_CTL_ADD)")
            if let held = logThrottle.admit("epoll") {
                log.warning("connection \(c.id): cannot be watched for events: \(error); closing it\(LogThrottle.suffix(held))")
            }
            close(c)
            return
        }
        c.registered = true
        c.interest = want
    }
}
