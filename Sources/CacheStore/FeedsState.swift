#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// What each feed's stored pages were walked with, and what their last
/// page said (docs/storage-format.md, "The feeds' state"): `feeds.state`
/// at the top of the store.
///
/// A page that answers 304 stands with the next request and the items it
/// gave when it was read; under other settings (another paging kind, other
/// pointers) that is not what it would give now. So each refresh stores a
/// digest of the settings it walked with, and a refresh under settings of
/// another digest asks every page without validators. The "has more"
/// warning of the last page is kept beside it, so that it still stands
/// after a restart while that page answers 304.
public struct FeedsState: Sendable, Equatable {
    /// One feed's entry.
    public struct Entry: Sendable, Equatable {
        /// The digest of the settings the stored pages were walked with.
        public var settings: Hash128
        /// The last page's "has more" warning, if it had one.
        public var warning: String?

        public init(settings: Hash128, warning: String? = nil) {
            self.settings = settings
            self.warning = warning
        }
    }

    public var entries: [Feed: Entry] = [:]

    public init(entries: [Feed: Entry] = [:]) { self.entries = entries }

    /// The file's first line.
    static let header = "cached feeds state 1"
    /// The file is refused past this size.
    static let maxBytes = 16 << 10
    /// A warning is stored with at most this many bytes.
    static let maxWarningBytes = 2048

    private static func name(_ feed: Feed) -> String { feed == .posts ? "posts" : "manifest" }

    /// A warning as the file keeps it: control bytes as spaces, at most
    /// `maxWarningBytes` (cut at a character, saying how much was cut).
    public static func clean(_ warning: String) -> String {
        String(decoding: warning.utf8.map { $0 < 0x20 || $0 == 0x7F ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
            .cut(toBytes: maxWarningBytes)
    }

    /// The file's bytes: the header, then per feed `NAME HEX` and, when it
    /// has one, `NAME-warning TEXT` (control bytes written as spaces), then
    /// `check` and the XXH3-128 of every byte before it.
    public var encoded: [UInt8] {
        var lines = [Self.header]
        for feed in Feed.allCases {
            guard let e = entries[feed] else { continue }
            lines.append("\(Self.name(feed)) \(e.settings.hex)")
            if let w = e.warning { lines.append("\(Self.name(feed))-warning \(Self.clean(w))") }
        }
        let body = Array((lines.joined(separator: "\n") + "\n").utf8)
        return body + Array("check \(Hash128(of: body).hex)\n".utf8)
    }

    /// Reads the file's bytes; throws saying what is wrong with them.
    public init(decoding bytes: [UInt8]) throws(FeedsStateDamage) {
        guard bytes.count <= Self.maxBytes else { throw FeedsStateDamage("larger than \(Self.maxBytes) bytes") }
        guard bytes.last == UInt8(ascii: "\n") else { throw FeedsStateDamage("cut short (no final newline)") }
        let checkLine = 6 + 32 + 1
        guard bytes.count >= checkLine else { throw FeedsStateDamage("cut short (no check line)") }
        let body = Array(bytes.dropLast(checkLine))
        guard Array(bytes.suffix(checkLine)) == Array("check \(Hash128(of: body).hex)\n".utf8) else {
            throw FeedsStateDamage("its check does not match its bytes")
        }
        var lines = String(decoding: body, as: UTF8.self).lines()
        if lines.last == "" { lines.removeLast() }  // after the final newline
        guard lines.first == Self.header else { throw FeedsStateDamage("its first line is not \"\(Self.header)\"") }
        for (n, line) in lines.enumerated().dropFirst() {
            guard let space = line.firstIndex(of: " ") else { throw FeedsStateDamage("line \(n + 1) has no value") }
            let key = String(line[..<space]), value = String(line[line.index(after: space)...])
            guard let feed = Feed.allCases.first(where: { key == Self.name($0) || key == Self.name($0) + "-warning" }) else {
                throw FeedsStateDamage("line \(n + 1) names no feed")
            }
            if key.hasSuffix("-warning") {
                guard entries[feed] != nil else { throw FeedsStateDamage("line \(n + 1): a warning before its feed's settings") }
                entries[feed]?.warning = value
            } else {
                guard let h = Hash128(hex: value) else { throw FeedsStateDamage("line \(n + 1): not 32 lowercase hex digits") }
                entries[feed] = Entry(settings: h)
            }
        }
    }
}

/// Why `feeds.state` was not taken as it is.
public struct FeedsStateDamage: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// The feeds' state file, as `Store.readFeedsState` found it.
public enum FeedsStateFile: Sendable, Equatable {
    /// There is none (a new store, or one written before it existed).
    case absent
    case found(FeedsState)
    /// It could not be read, or not taken as it is: why.
    case damaged(String)
}

extension Store {
    /// Reads `feeds.state`. Anything but a regular file that decodes (a link,
    /// a directory, a read error, a torn or edited file) is `.damaged`.
    public func readFeedsState() -> FeedsStateFile {
        let name = StoreNames.feedsStateFile
        switch readStateFile(name, limit: FeedsState.maxBytes + 1) {
        case .damaged(let why): return .damaged(why)
        case .absent: return .absent
        case .bytes(let bytes):
            do throws(FeedsStateDamage) { return .found(try FeedsState(decoding: bytes)) } catch {
                return .damaged("\(directory)/\(name): \(error)")
            }
        }
    }

    /// Replaces `feeds.state` durably: a temp file in `tmp/`, fsync, rename,
    /// fsync of the store directory. Refused once writes stopped.
    public func writeFeedsState(_ state: FeedsState) throws(StoreError) {
        if let why = writesStopped { throw .writesStopped(why) }
        try writingFiles { () throws(StoreError) in
            do throws(SystemError) {
                try files.writeDurably(state.encoded, to: directory + "/" + StoreNames.feedsStateFile, tempDirectory: tempDirectory, mode: 0o600)
            } catch { throw .io(error) }
        }
    }
}
