#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// What replaying a log's bytes found.
public struct ScanOutcome: Sendable, Equatable {
    /// Bytes up to the end of the last committed transaction: everything kept.
    public var validLength: Int
    /// Records in committed transactions (commit markers included).
    public var records: Int
    /// Why the scan stopped before the end, or nil when every byte was good.
    public var problem: String?
    /// Set when the scan stopped at something a newer cached wrote (then
    /// `problem` says so too): the log must be refused, not cut.
    public var newer: NewerFormat? = nil
    /// The format version the header names; 0 when there is no header of ours.
    public var version: UInt8 = 1
}

/// What shows that a log was written by a newer cached: bytes that are not
/// damage (the header is ours, the record passed its checksum) but that
/// this version does not know. docs/storage-format.md, "Format evolution".
public enum NewerFormat: Sendable, Equatable, CustomStringConvertible {
    /// The header names format `version`, higher than `RecordCodec.formatVersion`.
    case formatVersion(UInt8)
    /// The record framed at `offset` passed its checksum but holds `what`
    /// (an unknown record type, field value or extra field).
    case record(offset: Int, what: String)

    public var description: String {
        switch self {
        case .formatVersion(let v):
            return "index.log format version \(v), this daemon reads version \(RecordCodec.formatVersion)"
        case let .record(offset, what):
            return "\(what) at offset \(offset) of index.log"
        }
    }
}

/// Why `IndexLog.init` did not open a log.
public enum IndexLogError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A file system call failed (opening, reading, cutting or syncing the log).
    case io(SystemError)
    /// The log was written by a newer cached (what shows it): refused, every
    /// byte left as it was.
    case writtenByNewerVersion(NewerFormat)

    public var description: String {
        switch self {
        case .io(let e): "\(e)"
        case .writtenByNewerVersion(let newer): "index.log written by a newer cached: \(newer)"
        }
    }
}

/// Replays a log's bytes into a fresh in-memory index and summarises it:
/// the replay path without any file, for fuzzing and tools.
public enum LogReplay {
    public static func summary(_ bytes: [UInt8]) -> (outcome: ScanOutcome, posts: Int, rows: Int, objects: Int) {
        var state = StoreState()
        state.posts.deferTitles()  // as a store's open replays
        let outcome = LogScanner.scan(bytes) { state.apply(transaction: $0) }
        state.posts.locateTitles(threads: 1)
        state.orderPosts()
        _ = state.liveTransactions()
        return (outcome, state.posts.count, state.rows.count, state.objects.count)
    }
}

/// What recovery did to a damaged log at start.
public struct LogRecovery: Sendable {
    public var problem: String
    /// Where the kept bytes end and the cut ones begin.
    public var cutOffset: Int
    public var cutLength: Int
    /// The file that holds the cut bytes.
    public var savedTo: String
}

/// The append-only log file: a value the store keeps under its writer lock
/// (`Store.WriterState`), so only the thread holding that lock changes it.
struct IndexLog: Sendable {
    let path: String
    private var fd: FileDescriptor
    /// Where the next record goes; the file is truncated back here if an append fails.
    private(set) var length: Int64
    /// Records in the file (commit markers included), for compaction decisions.
    private(set) var recordCount: Int
    /// The format version its header names: the records appended must be of
    /// it or older (`Store.append` rewrites the log under a newer one first).
    private(set) var version: UInt8

    /// The store directory the log lives in (every path resolved beneath it).
    private let files: ConfinedDirectory

    /// Opens (creating if missing) and replays the log. A damaged tail is cut
    /// and its bytes saved beside the log; the cut is reported, never fatal.
    ///
    /// A log written by a newer cached (a newer format version in the header,
    /// or a record that passes its checksum but holds what this version does
    /// not know) is refused: nothing is written, cut or saved aside, and the
    /// error is `IndexLogError.writtenByNewerVersion` (`StoreError`'s of the
    /// same name once mapped); any other failure is `IndexLogError.io`.
    /// `apply` may have been called for the transactions before the finding
    /// (and for parts of a large one being read again when the read
    /// failed); the caller discards that state with the error.
    init(directory files: ConfinedDirectory, name: String, apply: ([LogRecord]) -> Void) throws(IndexLogError) {
        self.files = files
        path = files.path + "/" + name
        // O_APPEND: a write lands at the end even if the file was cut under
        // us, so a cut shows as a length that does not add up (Store checks).
        do throws(SystemError) { fd = try files.open(name, [.readWrite, .create, .append], mode: 0o600) } catch { throw .io(error) }
        // Read in pieces as the replay goes: a log of 300 MB is never in memory whole.
        let outcome: ScanOutcome
        let size: Int
        do throws(SystemError) {
            outcome = try LogScanner.scan(reading: fd, apply: apply)
            size = Int(try fd.status().size)
        } catch { fd.close(); throw .io(error) }
        if let newer = outcome.newer {
            // Not damage: a newer cached's store. Leave every byte as it is.
            fd.close()
            throw .writtenByNewerVersion(newer)
        }
        recordCount = outcome.records
        length = Int64(outcome.validLength)
        version = outcome.version
        recovery = nil
        do throws(SystemError) {
            if outcome.validLength < size {
                let problem = outcome.problem ?? "unexpected bytes"
                var saved = "\(path)\(StoreNames.setAsideInfix)\(Clock.wallSeconds())-\(getpid())"
                try fd.seek(to: length)
                let tail = try fd.readToEnd(limit: size - outcome.validLength)
                do throws(SystemError) {
                    try files.writeDurably(tail, to: saved, tempDirectory: files.path, mode: 0o600)
                } catch where error.isNoSpace {
                    // The damaged tail holds no record that verified; keeping a
                    // copy is a courtesy. On a full disk the store still opens
                    // (cutting the file frees space), and the log line says so.
                    saved = "nowhere (\(error))"
                }
                recovery = LogRecovery(problem: problem, cutOffset: outcome.validLength,
                                       cutLength: tail.count, savedTo: saved)
            }
            if outcome.validLength == 0 {
                // A new log (or one whose header was damaged) names the
                // oldest version: nothing in it needs a newer one yet.
                version = RecordCodec.firstFormatVersion
                let header = RecordCodec.header(version: version)
                try fd.truncate(to: 0)
                try fd.seek(to: 0)
                try fd.writeAll(header)
                length = Int64(header.count)
                try fd.sync()
                try files.syncDirectory(files.path)
            } else if outcome.validLength < size {
                try fd.truncate(to: length)
                try fd.sync()
            }
            try fd.seek(to: length)
        } catch {
            fd.close()
            throw .io(error)
        }
    }

    /// Set when the last open cut a damaged tail.
    private(set) var recovery: LogRecovery?

    /// Set when an append failed and the file could not be cut back after
    /// it (the error of the cut): a partial transaction ends the log, and a
    /// replay would stop there, so nothing may be appended after it
    /// (`Store.append` stops writes).
    private(set) var uncutTail: SystemError?

    /// Appends `records` and a commit marker as one transaction, then fsyncs.
    /// On failure the file is cut back so no partial transaction remains
    /// (when even that fails, `uncutTail` says so).
    /// A record newer than the header's version is refused (EINVAL) before
    /// anything is written: the header must promise every record after it.
    mutating func append(_ records: [LogRecord]) throws(SystemError) {
        if let newer = records.first(where: { $0.formatVersion > version }) {
            throw SystemError("append", "a format-version-\(newer.formatVersion) record (\(RecordCodec.name(ofType: newer.typeByte))) to \(path), which is version \(version)", errno: EINVAL)
        }
        // Written a piece at a time: a transaction of a million posts (300 MB)
        // never has its whole encoding in memory beside the posts themselves.
        var bytes: [UInt8] = []
        var written = 0
        do throws(SystemError) {
            for r in records {
                RecordCodec.encode(r, into: &bytes)
                if bytes.count >= Self.appendPiece {
                    try fd.writeAll(bytes)
                    written += bytes.count
                    bytes.removeAll(keepingCapacity: true)
                }
            }
            RecordCodec.encode(.commit, into: &bytes)
            try fd.writeAll(bytes)
            written += bytes.count
            try fd.sync()
        } catch {
            do throws(SystemError) {
                try fd.truncate(to: length)
                _ = try fd.seek(to: length)
            } catch let cut {
                uncutTail = cut
            }
            throw error
        }
        length += Int64(written)
        recordCount += records.count + 1
    }

    /// A transaction's encoding is written once it holds this much.
    static let appendPiece = 4 << 20

    /// Replaces the log with `transactions`: written to a temp file, fsynced,
    /// renamed over the log, directory fsynced. A crash leaves the old log or
    /// the new one. The header names the oldest version that holds every
    /// record, and `atLeast` at least (a move up before a newer record).
    /// With `stop` (compaction), the flag is looked at before each
    /// transaction is encoded and as the file is written (`writeDurably`):
    /// once it is raised, `ECANCELED` is thrown before the rename, the
    /// commit point, so the log stays as it was and no temp file is left.
    ///
    /// `transactions` hands each transaction to the function it is given,
    /// in order; each is encoded and written as it comes, `appendPiece` at
    /// a time, so the new log is never whole in memory (a million posts'
    /// log is 300 MB).
    mutating func rewrite(atLeast minimum: UInt8 = RecordCodec.firstFormatVersion, tempDirectory: String, stop: StopFlag? = nil,
                          transactions: ((([LogRecord]) throws(SystemError) -> Void)) throws(SystemError) -> Void) throws(SystemError) {
        var newVersion = minimum
        var count = 0
        var total = 0
        try files.writeDurably(to: path, tempDirectory: tempDirectory, mode: 0o600, stop: stop) { (out, temp) throws(SystemError) in
            var bytes = RecordCodec.header(version: minimum)
            var unsynced = 0
            func flush() throws(SystemError) {
                try out.writeAll(bytes)
                total += bytes.count
                unsynced += bytes.count
                bytes.removeAll(keepingCapacity: true)
                // Synced as it goes when it may be stopped: no one sync at the end is long.
                if stop != nil, unsynced >= ConfinedDirectory.stoppablePiece { try out.syncData(); unsynced = 0 }
            }
            try transactions { (t) throws(SystemError) in
                if stop?.isRaised == true { throw SystemError("write", "\(path) (its rewrite)", errno: ECANCELED) }
                for r in t {
                    newVersion = max(newVersion, r.formatVersion)
                    RecordCodec.encode(r, into: &bytes)
                }
                RecordCodec.encode(.commit, into: &bytes)
                count += t.count + 1
                if bytes.count >= Self.appendPiece { try flush() }
            }
            try flush()
            // The header, written first with the least version, names the
            // version of the newest record written.
            if newVersion != minimum {
                _ = try out.seek(to: 0)
                try out.writeAll(RecordCodec.header(version: newVersion))
            }
        }
        let newFD = try files.open(path, [.readWrite, .append])
        fd.close()
        fd = newFD
        length = Int64(total)
        version = newVersion
        try fd.seek(to: length)
        recordCount = count
    }

    /// `rewrite(atLeast:tempDirectory:stop:transactions:)` of transactions held in memory.
    mutating func rewrite(_ transactions: [[LogRecord]], atLeast minimum: UInt8 = RecordCodec.firstFormatVersion,
                          tempDirectory: String, stop: StopFlag? = nil) throws(SystemError) {
        try rewrite(atLeast: minimum, tempDirectory: tempDirectory, stop: stop) { (emit) throws(SystemError) in
            for t in transactions { try emit(t) }
        }
    }

    func close() { fd.close() }

    /// The open log file (for identity checks).
    var descriptor: FileDescriptor { fd }
}
