import CacheSystem
/// The fast path for the common requests: a flat JSON object whose members
/// are short ASCII strings without escapes, plain integers or booleans
/// (`{"op":"get_post","id":7}`, as any client writes it, spaces allowed).
///
/// It only ever accepts lines that the general parser accepts with the same
/// meaning; anything else (escapes, nesting, numbers with fraction, errors of
/// any kind, ops other than the hot ones) returns nil and takes the general
/// path, which owns every error message.
enum FastRequest {
    private enum Value {
        case string(Range<Int>)
        case integer(Int64)
        case bool(Bool)
        case null
    }

    /// The request line's common shapes, recognised byte by byte without
    /// building a JSON tree (the general parser decides everything else).
    // Longer than a screen on purpose: one pass over the bytes with its state
    // in locals is what makes a hit cheaper than a Redis GET; split into
    // calls, the state would move through memory on every byte.
    static func parse(_ b: UnsafeRawBufferPointer) -> Request? {
        var i = 0
        let n = b.count
        @inline(__always) func skip() { while i < n, b[i] == 0x20 || b[i] == 0x09 { i += 1 } }
        skip()
        guard i < n, b[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        var op: Range<Int>?
        var id: Int64?, row: Int64?
        var fetch: Bool?
        var hash: Range<Int>?
        var tag: Range<Int>?
        var sawMember = false
        while true {
            skip()
            guard i < n else { return nil }
            if b[i] == UInt8(ascii: "}") && !sawMember { i += 1; break }
            // Key: an ASCII string without escapes.
            guard b[i] == 0x22 else { return nil }
            i += 1
            let keyStart = i
            while i < n, b[i] != 0x22 { if b[i] == 0x5C || b[i] < 0x20 || b[i] >= 0x80 { return nil }; i += 1 }
            guard i < n else { return nil }
            let key = keyStart..<i
            i += 1
            skip()
            guard i < n, b[i] == UInt8(ascii: ":") else { return nil }
            i += 1
            skip()
            guard i < n else { return nil }
            let valueStart = i
            let value: Value
            switch b[i] {
            case 0x22:
                i += 1
                let s = i
                while i < n, b[i] != 0x22 { if b[i] == 0x5C || b[i] < 0x20 || b[i] >= 0x80 { return nil }; i += 1 }
                guard i < n else { return nil }
                value = .string(s..<i)
                i += 1
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                var negative = false
                if b[i] == UInt8(ascii: "-") { negative = true; i += 1 }
                let digitsStart = i
                var v: Int64 = 0
                while i < n, ASCII.isDigit(b[i]) {
                    let (m, o1) = v.multipliedReportingOverflow(by: 10)
                    let (a, o2) = m.addingReportingOverflow(Int64(b[i] - 0x30))
                    if o1 || o2 { return nil }
                    v = a
                    i += 1
                }
                let digits = i - digitsStart
                guard digits > 0, !(digits > 1 && b[digitsStart] == 0x30) else { return nil }
                if i < n, b[i] == UInt8(ascii: ".") || b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") { return nil }
                value = .integer(negative ? -v : v)
            case UInt8(ascii: "t"):
                guard i + 4 <= n, b[i + 1] == 0x72, b[i + 2] == 0x75, b[i + 3] == 0x65 else { return nil }
                i += 4; value = .bool(true)
            case UInt8(ascii: "f"):
                guard i + 5 <= n, b[i + 1] == 0x61, b[i + 2] == 0x6C, b[i + 3] == 0x73, b[i + 4] == 0x65 else { return nil }
                i += 5; value = .bool(false)
            case UInt8(ascii: "n"):
                guard i + 4 <= n, b[i + 1] == 0x75, b[i + 2] == 0x6C, b[i + 3] == 0x6C else { return nil }
                i += 4; value = .null
            default:
                return nil
            }
            sawMember = true
            // A variant is an object for the general parser to check, whatever it holds.
            if equals(b, key, "variant") { return nil }
            // Later duplicates win, as in the general parser.
            if equals(b, key, "hash") {
                guard case .string(let r) = value else { return nil }
                hash = r
            }
            switch (equals(b, key, "op"), equals(b, key, "id"), equals(b, key, "row"), equals(b, key, "fetch"), equals(b, key, "tag")) {
            case (true, _, _, _, _):
                guard case .string(let r) = value else { return nil }
                op = r
            case (_, true, _, _, _):
                guard case .integer(let v) = value else { return nil }
                id = v
            case (_, _, true, _, _):
                guard case .integer(let v) = value else { return nil }
                row = v
            case (_, _, _, true, _):
                switch value {
                case .bool(let f): fetch = f
                case .null: fetch = nil
                default: return nil
                }
            case (_, _, _, _, true):
                tag = valueStart..<i
            default:
                break  // unknown members are ignored
            }
            skip()
            guard i < n else { return nil }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            guard b[i] == UInt8(ascii: "}") else { return nil }
            i += 1
            break
        }
        skip()
        guard i == n, let op else { return nil }
        let tagBytes = tag.map { Array(UnsafeRawBufferPointer(rebasing: b[$0])) }
        if equals(b, op, "get_post"), let id { return Request(command: .getPost(id: .int(id)), tag: tagBytes) }
        if equals(b, op, "ping") { return Request(command: .ping, tag: tagBytes) }
        if equals(b, op, "get_image"), let row, row >= 0, row <= Int64(Int32.max) {
            return Request(command: .getImage(row: Int(row), fetch: fetch ?? true), tag: tagBytes)
        }
        if equals(b, op, "status") { return Request(command: .status, tag: tagBytes) }
        if let hash, let name = Hash128(hex: String(decoding: UnsafeRawBufferPointer(rebasing: b[hash]), as: UTF8.self)) {
            if equals(b, op, "read") { return Request(command: .read(hash: name), tag: tagBytes) }
            if equals(b, op, "open") { return Request(command: .open(hash: name), tag: tagBytes) }
        }
        return nil
    }

    @inline(__always)
    private static func equals(_ b: UnsafeRawBufferPointer, _ r: Range<Int>, _ s: StaticString) -> Bool {
        guard r.count == s.utf8CodeUnitCount else { return false }
        for k in 0..<r.count where b[r.lowerBound + k] != s.utf8Start[k] { return false }
        return true
    }
}
