import CacheSystem

/// The names of post files in `posts/` (docs/storage-format.md, "The
/// store's own names"): one safe file name per id, never the same for two
/// ids, whatever bytes a string id holds.
///
/// - an integer id: `<id>.json`, in decimal (`-5.json`);
/// - a string id: `s_` + its UTF-8 bytes with `a-z 0-9 - _ .` kept and
///   every other byte as `%XX` (uppercase hex) + `.json`, while that name
///   is at most `maxEncodedName` bytes;
/// - a longer one: `h_` + the XXH3-128 of its bytes (32 lowercase hex) + `.json`.
///
/// Uppercase letters are escaped too, so that no two names differ only in
/// case: two ids that do keep two files on a case-insensitive file system.
enum PostFileNames {
    /// The longest `s_` name; a longer one is hashed (`h_`). Far below the
    /// 255 bytes a file name may have.
    static let maxEncodedName = 200

    static let suffix = ".json"

    /// The file name of post `id`'s file.
    static func name(of id: PostID) -> String {
        switch id {
        case .int(let v): return "\(v)\(suffix)"
        case .string(let s):
            if let encoded = encodedName(Array(s.utf8)) { return encoded }
            return hashedName(Array(s.utf8))
        }
    }

    /// True for a name the store writes for hashed ids (whose id the name does not tell).
    static func isHashed(_ name: String) -> Bool { name.hasPrefix("h_") }

    /// True for a name of one of the store's forms, exactly as the store
    /// spells it: an integer's `<id>.json`, an `s_` name that decodes to an
    /// id and encodes back to itself (not `s_%2f.json`, not `s_A.json`), or
    /// `h_` and 32 lowercase hex digits. Nothing else in `posts/` is the store's.
    static func isStoreName(_ name: String) -> Bool {
        guard name.hasSuffix(suffix) else { return false }
        let stem = name.utf8.dropLast(suffix.utf8.count)
        if name.hasPrefix("s_") {
            guard let bytes = decode(stem.dropFirst(2)), let s = String(validating: bytes, as: UTF8.self),
                  let id = PostID(string: s) else { return false }
            return Self.name(of: id) == name
        }
        if name.hasPrefix("h_") {
            return ASCII.isLowercaseHex(stem.dropFirst(2), count: 32)
        }
        guard let v = Int64(String(decoding: stem, as: UTF8.self)) else { return false }
        return Self.name(of: .int(v)) == name
    }

    /// True for a byte kept as it is in an `s_` name.
    static func isKept(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."): true
        default: false
        }
    }

    /// `s_<escaped>.json`, or nil when that is longer than `maxEncodedName`.
    private static func encodedName(_ bytes: [UInt8]) -> String? {
        var out = Array("s_".utf8)
        out.reserveCapacity(bytes.count + 8)
        let hex = Array("0123456789ABCDEF".utf8)
        for b in bytes {
            if isKept(b) { out.append(b) } else { out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 0xF)]] }
            if out.count + suffix.utf8.count > maxEncodedName { return nil }
        }
        return String(decoding: out + Array(suffix.utf8), as: UTF8.self)
    }

    private static func hashedName(_ bytes: [UInt8]) -> String {
        "h_" + Hash128(of: bytes).hex + suffix
    }

    /// The bytes an escaped stem stands for; nil when a `%` is not followed
    /// by two uppercase hex digits. (Whether each byte was escaped as the
    /// store escapes it is checked by encoding back.)
    private static func decode(_ stem: Substring.UTF8View) -> [UInt8]? {
        var out: [UInt8] = []
        var i = stem.startIndex
        func digit(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        while i < stem.endIndex {
            let c = stem[i]
            stem.formIndex(after: &i)
            guard c == UInt8(ascii: "%") else { out.append(c); continue }
            guard i < stem.endIndex, let hi = digit(stem[i]) else { return nil }
            stem.formIndex(after: &i)
            guard i < stem.endIndex, let lo = digit(stem[i]) else { return nil }
            stem.formIndex(after: &i)
            out.append(hi << 4 | lo)
        }
        return out
    }
}
