import CacheSystem

/// What one scrub pass (a paced re-hash of every object) has checked and found.
public struct ScrubTotals: Sendable, Equatable {
    /// Objects checked (each once, whatever was found), and their bytes as
    /// the index knows them.
    public var objects = 0
    public var bytes: Int64 = 0
    /// Objects whose bytes did not match their name (quarantined).
    public var corrupt = 0
    /// Objects whose file gave a read error (set aside).
    public var unreadable = 0
    /// Objects whose file had gone (forgotten; their rows are fetched again on demand).
    public var missing = 0

    public init(objects: Int = 0, bytes: Int64 = 0, corrupt: Int = 0, unreadable: Int = 0, missing: Int = 0) {
        self.objects = objects
        self.bytes = bytes
        self.corrupt = corrupt
        self.unreadable = unreadable
        self.missing = missing
    }

    /// Corrupt, unreadable and missing objects together.
    public var findings: Int { corrupt + unreadable + missing }
}

/// The scrub's progress as kept in `scrub.state` (docs/storage-format.md,
/// "The scrub's state"), so that a pass resumes across restarts.
public struct ScrubState: Sendable, Equatable {
    /// A pass under way.
    public struct Pass: Sendable, Equatable {
        /// When it started, unix seconds.
        public var started: Int64
        /// The last object checked, in hash order; nil before the first.
        public var position: Hash128?
        /// What it has checked and found so far.
        public var totals: ScrubTotals

        public init(started: Int64, position: Hash128? = nil, totals: ScrubTotals = ScrubTotals()) {
            self.started = started
            self.position = position
            self.totals = totals
        }
    }

    /// A pass that ended.
    public struct Finished: Sendable, Equatable {
        /// When it started and ended, unix seconds.
        public var started: Int64
        public var ended: Int64
        public var totals: ScrubTotals

        public init(started: Int64, ended: Int64, totals: ScrubTotals) {
            self.started = started
            self.ended = ended
            self.totals = totals
        }
    }

    /// The pass under way; nil between passes.
    public var current: Pass?
    /// The last pass that ended; nil before the first.
    public var last: Finished?

    public init(current: Pass? = nil, last: Finished? = nil) {
        self.current = current
        self.last = last
    }
}

/// Why `scrub.state` could not be taken as it is.
public struct ScrubStateDamage: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// The text of `scrub.state`: a header line, a `pass` line while a pass is
/// under way, a `last` line once one ended, and a `check` line with the
/// XXH3-128 of the lines before it (a torn or edited file is told apart).
extension ScrubState {
    static let header = "cached scrub state 1"
    /// Far more than the four lines ever take: a longer file is not one.
    static let maxBytes = 1024

    /// The file's bytes.
    public var encoded: [UInt8] {
        var text = Self.header + "\n"
        if let p = current {
            text += "pass \(p.started) \(p.position?.hex ?? "-") \(Self.fields(p.totals))\n"
        }
        if let l = last {
            text += "last \(l.started) \(l.ended) \(Self.fields(l.totals))\n"
        }
        let body = Array(text.utf8)
        return body + Array("check \(Hash128(of: body).hex)\n".utf8)
    }

    private static func fields(_ t: ScrubTotals) -> String {
        "\(t.objects) \(t.bytes) \(t.corrupt) \(t.unreadable) \(t.missing)"
    }

    /// Reads the file's bytes back; throws what is wrong with them.
    public init(decoding bytes: [UInt8]) throws(ScrubStateDamage) {
        guard bytes.count <= Self.maxBytes else { throw ScrubStateDamage("longer than \(Self.maxBytes) bytes") }
        let (body, check) = try Self.checked(bytes)
        guard Hash128(of: body).hex == check else { throw ScrubStateDamage("its checksum does not match") }
        let lines = String(decoding: body, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        guard lines.first == Substring(Self.header) else { throw ScrubStateDamage("it does not begin with \"\(Self.header)\"") }
        self.init()
        for line in lines.dropFirst() { try read(line.split(separator: " ")) }
    }

    /// The bytes before the `check` line, and the digest it names.
    private static func checked(_ bytes: [UInt8]) throws(ScrubStateDamage) -> ([UInt8], String) {
        let suffixLength = "check ".utf8.count + 32 + 1
        guard bytes.count >= suffixLength, bytes.last == UInt8(ascii: "\n") else { throw ScrubStateDamage("it is cut short") }
        let split = bytes.count - suffixLength
        let tail = String(decoding: bytes[split...], as: UTF8.self)
        guard tail.hasPrefix("check "), split == 0 || bytes[split - 1] == UInt8(ascii: "\n") else {
            throw ScrubStateDamage("it has no check line")
        }
        return (Array(bytes[..<split]), String(tail.dropFirst(6).dropLast()))
    }

    private mutating func read(_ words: [Substring]) throws(ScrubStateDamage) {
        switch words.first {
        case "pass" where words.count == 8 && current == nil && last == nil:
            let position: Hash128? = words[2] == "-" ? nil : try Self.hash(words[2])
            current = Pass(started: try Self.number(words[1]), position: position, totals: try Self.totals(words[3...]))
        case "last" where words.count == 8 && last == nil:
            last = Finished(started: try Self.number(words[1]), ended: try Self.number(words[2]), totals: try Self.totals(words[3...]))
        default:
            throw ScrubStateDamage("an unexpected line \"\(Printable.escaped(Array(words.joined(separator: " ").utf8), limit: 80))\"")
        }
    }

    private static func totals(_ w: ArraySlice<Substring>) throws(ScrubStateDamage) -> ScrubTotals {
        let n = Array(w)
        return ScrubTotals(objects: Int(try number(n[0])), bytes: try number(n[1]), corrupt: Int(try number(n[2])),
                           unreadable: Int(try number(n[3])), missing: Int(try number(n[4])))
    }

    private static func number(_ word: Substring) throws(ScrubStateDamage) -> Int64 {
        guard word.utf8.allSatisfy(ASCII.isDigit), let n = Int64(word) else {
            throw ScrubStateDamage("\"\(Printable.escaped(Array(word.utf8), limit: 40))\" is not a count or a time")
        }
        return n
    }

    private static func hash(_ word: Substring) throws(ScrubStateDamage) -> Hash128 {
        guard let h = Hash128(hex: word) else {
            throw ScrubStateDamage("\"\(Printable.escaped(Array(word.utf8), limit: 40))\" is not an object's hash")
        }
        return h
    }
}
