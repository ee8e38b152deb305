import CacheSystem

/// A connection's answers leave in the order of its requests, however they
/// finish: an immediate answer waits behind earlier ones still pending, and
/// a late one is held in its request's slot until those before it are out.
extension Connection {
    /// Queues a complete answer behind any answers still pending.
    func answerNow(_ bytes: [UInt8]) {
        heldBytes += bytes.count
        if slots.isEmpty { enqueue(.bytes(bytes)) }
        else { slots.append((Connection.immediateSlot, [.bytes(bytes)], true)) }
    }

    /// Queues a complete answer line that carries `passed` (at least one
    /// descriptor) with its first byte.
    func answerNow(_ bytes: [UInt8], passing passed: [FileDescriptor]) {
        descriptors += passed.count
        heldBytes += bytes.count
        if slots.isEmpty {
            enqueue(.descriptors(passed))
            enqueue(.bytes(bytes))
        } else {
            slots.append((Connection.immediateSlot, [.descriptors(passed), .bytes(bytes)], true))
        }
    }

    /// Queues `size` bytes of a file from `offset` right after the answer just queued.
    func appendFile(_ fd: FileDescriptor, offset: Int64, size: Int64) {
        descriptors += 1
        if slots.isEmpty { enqueue(.file(fd, offset: offset, size: size)) }
        else { slots[slots.count - 1].chunks.append(.file(fd, offset: offset, size: size)) }
    }

    /// Holds a place for the answer to request `slot`, which comes later.
    func awaitAnswer(_ slot: UInt64) {
        slots.append((slot, [], false))
    }

    /// Queues the answer a handler gave for request `slot` while it was
    /// read (both front-ends): queued behind earlier answers, or, `.later`,
    /// its slot held. True for `.later`. A descriptor is passed only over
    /// JSON lines (HTTP never makes one; it would be closed).
    @discardableResult
    func answer(_ answer: Answer, slot: UInt64) -> Bool {
        switch answer {
        case .now(let bytes): answerNow(bytes)
        case let .nowFile(head, fd, offset, length):
            answerNow(head)
            appendFile(fd, offset: offset, size: length)
        case let .nowPassing(line, fds):
            if framing == .jsonLines { answerNow(line, passing: fds) } else { for fd in fds { fd.close() }; answerNow(line) }
        case .later:
            awaitAnswer(slot)
            return true
        }
        return false
    }

    /// Puts a delivery in its slot and moves every complete answer at the
    /// head to the output queue. False when the slot is unknown (its chunks
    /// are released) or a droppable delivery was dropped because the client
    /// already has `maxQueuedBytes` waiting or every connection together
    /// holds as much as they may (`totals`).
    @discardableResult
    func deliver(_ d: Delivery, maxQueuedBytes: Int) -> Bool {
        guard let index = slots.firstIndex(where: { $0.id == d.slot }) else {
            for chunk in d.chunks { chunk.release() }
            return false
        }
        if d.droppable {
            let waiting = slots[index].chunks.reduce(0) { n, chunk in
                if case .bytes(let b) = chunk { return n + b.count }
                return n
            }
            if queuedBytes + waiting >= maxQueuedBytes || totals.full { return false }  // (dropped, not queued)
        }
        descriptors += d.chunks.descriptorCount
        heldBytes += d.byteCount
        guard index == 0 else {
            slots[index].chunks.append(contentsOf: d.chunks)
            if d.done { slots[index].done = true }
            return true
        }
        for chunk in d.chunks { enqueue(chunk) }
        guard d.done else { return true }
        slots.removeFirst()
        // Answers queued behind it may now be complete.
        while let head = slots.first {
            for chunk in head.chunks { enqueue(chunk) }
            slots[0].chunks = []
            if head.done { slots.removeFirst() } else { break }
        }
        return true
    }

    /// The slot id of an answer that was complete when it was queued.
    static let immediateSlot = UInt64.max
}
