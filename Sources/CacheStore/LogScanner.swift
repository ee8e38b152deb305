#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// Replays the framed records of an index log.
public enum LogScanner {
    /// Walks `bytes` (the whole file, header included), calling `apply` with
    /// each committed transaction's records in order (a large one in parts,
    /// below). Stops at the first torn,
    /// corrupt or undecodable record; records after the last commit marker are
    /// not applied. A header naming a newer format version, or a record that
    /// passes its checksum but holds what this version does not know, stops
    /// the scan with `newer` set: the caller must not cut anything then.
    ///
    /// A transaction of more than `heldRecords` records (a refresh of a
    /// million posts) is not held decoded until its commit: it is read to
    /// its commit marker, each record checked and decoded and let go, then
    /// read again from its first record and given to `apply` in parts of
    /// `heldRecords` (more when a run of `objectRemoved` would be cut: a
    /// part ends after another record), in order, each decoded just before
    /// it is applied. So
    /// nothing of a transaction is applied unless all of it was read whole,
    /// as before, and its records are applied while they are in the CPU's
    /// cache rather than 300 MB after they were decoded (a restart with a
    /// million posts in one transaction took twice as long as with them in
    /// transactions of 64).
    public static func scan(_ bytes: [UInt8], apply: ([LogRecord]) -> Void) -> ScanOutcome {
        var window = LogWindow(bytes: bytes)
        // A window over bytes in memory reads nothing, so it cannot fail.
        return (try? scan(&window, apply: apply)) ?? ScanOutcome(validLength: 0, records: 0)
    }

    /// `scan(_:apply:)` of the file `fd`, from offset 0 (with `pread`: its
    /// position is left as it is), read a piece at a time (`LogWindow`): the
    /// replay of a log of any size holds one piece and the largest record,
    /// not the file. Throws only what reading the file throws (after
    /// `apply` may have had parts of a transaction it read again: the
    /// caller drops what it built).
    static func scan(reading fd: FileDescriptor, piece: Int = LogWindow.piece,
                     apply: ([LogRecord]) -> Void) throws(SystemError) -> ScanOutcome {
        var window = LogWindow(reading: fd, piece: piece)
        return try scan(&window, apply: apply)
    }

    // A little over a screen: the frame checks are in the order of
    // docs/storage-format.md's "index.log" and read best in one place.
    private static func scan(_ w: inout LogWindow, apply: ([LogRecord]) -> Void) throws(SystemError) -> ScanOutcome {
        let headerSize = RecordCodec.magic.count + 1
        let present = try w.available(0, headerSize)
        let hasMagic = present >= headerSize && w.slice(0, RecordCodec.magic.count).elementsEqual(RecordCodec.magic)
        let version = hasMagic ? w.slice(RecordCodec.magic.count, 1).first! : 0
        if version > RecordCodec.formatVersion {
            let newer = NewerFormat.formatVersion(version)
            return ScanOutcome(validLength: 0, records: 0, problem: "written by a newer cached: \(newer)", newer: newer, version: version)
        }
        if version < RecordCodec.firstFormatVersion {
            let problem = present == 0 ? nil : "missing or unknown file header"
            return ScanOutcome(validLength: 0, records: 0, problem: problem, version: 0)
        }
        var offset = headerSize
        var committedEnd = offset
        var committedRecords = 0
        var pending: [LogRecord] = []
        /// The records of the transaction being read once it has more than `heldRecords`, counted, not held.
        var streamed: Int?
        var problem: String?
        var newer: NewerFormat?
        while true {
            let head = try w.available(offset, RecordCodec.frameHeaderSize)
            if head == 0 { break }
            guard head == RecordCodec.frameHeaderSize else {
                problem = "torn record header at offset \(offset)"; break
            }
            let length = Int(w.uint32LE(at: offset))
            let checksum = w.uint32LE(at: offset + 4)
            guard length >= 1, length <= RecordCodec.maxPayload else {
                problem = "bad record length \(length) at offset \(offset)"; break
            }
            let start = offset + RecordCodec.frameHeaderSize
            let body = try w.available(start, length)
            guard body == length else {
                problem = "torn record at offset \(offset): \(length) bytes announced, \(body) present"; break
            }
            // Scoped: no slice of the window may outlive this record (the
            // window's next read would copy its whole buffer).
            let decoded = { () -> Result<LogRecord, RecordDecodingError>? in
                let payload = w.slice(start, length)
                guard payload.withUnsafeBytes({ recordChecksum($0) }) == checksum else { return nil }
                return Result { () throws(RecordDecodingError) in try RecordCodec.decodePayload(payload, version: version) }
            }()
            guard let decoded else {
                problem = "checksum mismatch at offset \(offset)"; break
            }
            let record: LogRecord
            do throws(RecordDecodingError) { record = try decoded.get() } catch {
                if error.kind == .unknown {
                    newer = .record(offset: offset, what: error.description)
                    problem = "written by a newer cached: \(newer!)"
                } else {
                    problem = "undecodable record at offset \(offset): \(error)"
                }
                break
            }
            let recordStart = offset
            offset = start + length
            if record == .commit {
                if let count = streamed {
                    try reapply(w.rereading(from: committedEnd), from: committedEnd, to: recordStart, version: version, apply: apply)
                    committedRecords += count + 1
                    streamed = nil
                } else {
                    apply(pending)
                    committedRecords += pending.count + 1
                    pending.removeAll(keepingCapacity: true)
                }
                committedEnd = offset
            } else if let count = streamed {
                streamed = count + 1
            } else if pending.count == heldRecords {
                streamed = pending.count + 1
                pending = []
            } else {
                pending.append(record)
            }
        }
        if problem == nil && committedEnd < offset {
            problem = "uncommitted transaction of \(streamed ?? pending.count) records at offset \(committedEnd)"
        }
        return ScanOutcome(validLength: committedEnd, records: committedRecords, problem: problem, newer: newer, version: version)
    }
}

extension LogScanner {
    /// The most records of a transaction held decoded until its commit is
    /// read; a larger one is applied in parts of this many (a compacted log's
    /// transactions are 64 posts, or 64 rows with their records).
    static let heldRecords = 4096

    /// Gives `apply` the records framed from `start` to `end` (a committed
    /// transaction, its commit marker at `end`, every record already checked
    /// and decoded once) in parts of `heldRecords`, read through `w`. Bytes
    /// that no longer check or decode (the file changed under the scan,
    /// which holds the store's lock) throw rather than apply half of it.
    private static func reapply(_ window: LogWindow, from start: Int, to end: Int, version: UInt8,
                                apply: ([LogRecord]) -> Void) throws(SystemError) {
        var w = window
        var offset = start
        var part: [LogRecord] = []
        part.reserveCapacity(heldRecords)
        let changed = SystemError("replay", "index.log changed while it was read", errno: EIO)
        while offset < end {
            guard try w.available(offset, RecordCodec.frameHeaderSize) == RecordCodec.frameHeaderSize else { throw changed }
            let length = Int(w.uint32LE(at: offset))
            let checksum = w.uint32LE(at: offset + 4)
            let body = offset + RecordCodec.frameHeaderSize
            guard length >= 1, length <= RecordCodec.maxPayload, body + length <= end,
                  try w.available(body, length) == length else { throw changed }
            let record = { () -> LogRecord? in
                let payload = w.slice(body, length)
                guard payload.withUnsafeBytes({ recordChecksum($0) }) == checksum else { return nil }
                return try? RecordCodec.decodePayload(payload, version: version)
            }()
            guard let record else { throw changed }
            // A part never ends inside a run of removals: StoreState applies a
            // run with one pass over the rows, and a run cut every 4,096
            // records would make a million removals a pass per part (an
            // eviction's or gc's transaction: 2.4 s whole, 34 s in parts, in
            // a debug build; the review). Their records hold no bytes.
            if part.count >= heldRecords, !(isRemoval(part.last) && isRemoval(record)) {
                apply(part)
                part.removeAll(keepingCapacity: true)
            }
            part.append(record)
            offset = body + length
        }
        if !part.isEmpty { apply(part) }
    }

    private static func isRemoval(_ record: LogRecord?) -> Bool {
        if case .objectRemoved? = record { return true }
        return false
    }
}

/// The bytes of a log from some offset on, read from its file a piece at a
/// time as the scan moves forward (or all given at once): the bytes before
/// the record being read are dropped when more are read. One buffer serves
/// every piece: its pages are faulted in once, not once per piece (a
/// buffer per piece cost a start 72,000 page faults for a 294 MB log).
struct LogWindow {
    /// How much is read at once (a test reads less).
    static let piece = 8 << 20
    private let piece: Int

    /// The log's bytes from `start` are `buffer[..<valid]`; when reading,
    /// the rest of `buffer` is room for the next read.
    private var buffer: [UInt8]
    private var valid: Int
    /// The file offset of `buffer[0]`.
    private var start = 0
    private let fd: FileDescriptor?
    private var atEnd: Bool

    /// All of a log's bytes, already in memory.
    init(bytes: [UInt8]) {
        buffer = bytes
        valid = bytes.count
        fd = nil
        atEnd = true
        piece = Self.piece
    }

    /// The log read from `fd` (with `pread`, from offset `start` on; the
    /// file's position is left where it is).
    init(reading fd: FileDescriptor, from start: Int = 0, piece: Int = Self.piece) {
        buffer = []
        valid = 0
        self.start = start
        self.fd = fd
        atEnd = false
        self.piece = piece
    }

    /// A second window over the same log, from `offset` on (this one is
    /// left as it is): the same bytes in memory, or the same file read again.
    func rereading(from offset: Int) -> LogWindow {
        guard let fd else { return LogWindow(bytes: buffer) }
        return LogWindow(reading: fd, from: offset, piece: piece)
    }

    /// How many of the `count` bytes at `offset` the log holds: `count`,
    /// or fewer where it ends first. Reads what it needs; the bytes before
    /// `offset` are never asked for again.
    mutating func available(_ offset: Int, _ count: Int) throws(SystemError) -> Int {
        // The scan asks for a frame header or a body it has checked against
        // RecordCodec.maxPayload: a hostile length never gets this far.
        precondition(count <= RecordCodec.frameHeaderSize + RecordCodec.maxPayload, "a log window of \(count) bytes")
        while start + valid < offset + count, !atEnd, let fd {
            // The bytes before `offset` go; those from it on (a part of a
            // record) move to the front, and the file's next bytes are read
            // after them. No slice of the buffer is held (the scan's are
            // scoped to a record), so this writes in place.
            let drop = min(max(offset - start, 0), valid)
            if drop > 0 {
                let kept = valid - drop
                buffer.withUnsafeMutableBytes { b in _ = memmove(b.baseAddress!, b.baseAddress! + drop, kept) }
                valid = kept
                start += drop
            }
            grow(to: max(piece, offset + count - start))
            var failure: SystemError?
            let n = buffer.withUnsafeMutableBytes { all -> Int in
                do throws(SystemError) { return try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: all[valid...]), at: Int64(start + valid)) } catch {
                    failure = error
                    return 0
                }
            }
            if let failure { throw failure }
            valid += n
            if n == 0 { atEnd = true }
        }
        return max(0, min(count, start + valid - offset))
    }

    /// Makes the buffer at least `size` bytes, keeping its valid ones: once
    /// for the piece, again only for a record larger than it. Set with
    /// `memset`, not element by element (a debug build took 1.5 s per 8 MiB).
    private mutating func grow(to size: Int) {
        guard buffer.count < size else { return }
        let old = buffer
        let kept = valid
        buffer = [UInt8](unsafeUninitializedCapacity: size) { out, initialized in
            old.withUnsafeBytes { o in if kept > 0 { _ = memcpy(out.baseAddress!, o.baseAddress!, kept) } }
            _ = memset(out.baseAddress! + kept, 0, size - kept)
            initialized = size
        }
    }

    /// The `count` bytes at `offset` (all `available`).
    func slice(_ offset: Int, _ count: Int) -> ArraySlice<UInt8> {
        buffer[(offset - start)..<(offset - start + count)]
    }

    /// The little-endian 32-bit number at `offset` (4 bytes `available`).
    func uint32LE(at offset: Int) -> UInt32 {
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(buffer[offset - start + i]) << (8 * UInt32(i)) }
        return v
    }
}
