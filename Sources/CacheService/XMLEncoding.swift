/// The encoding an XML feed is decoded in, as browsers and feed readers
/// decode it: the WHATWG Encoding Standard gives the labels of ISO-8859-1
/// and US-ASCII to windows-1252, which differs from ISO-8859-1 in 0x80-0x9F
/// only: printable characters there (`€`, `“`, `”`, `–`) where ISO-8859-1
/// has C1 controls no feed means. A feed declared ISO-8859-1 that was
/// written on Windows (the common case) otherwise stored `\u{93}Smart
/// quotes\u{94}`.
enum XMLEncoding {
    /// The labels the WHATWG Encoding Standard maps to windows-1252.
    static let windows1252Labels: Set<String> = [
        "ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819", "iso-8859-1", "iso-ir-100", "iso8859-1",
        "iso88591", "iso_8859-1", "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252", "x-cp1252",
    ]

    /// Whether a document is read as windows-1252: its `charset` (the
    /// HTTP one, which wins), else its XML declaration's encoding, is a
    /// label of it.
    static func readsAsWindows1252(charset: String?, body: [UInt8]) -> Bool {
        guard let label = charset ?? declared(in: body) else { return false }
        return windows1252Labels.contains(label.lowercased())
    }

    /// windows-1252's 0x80-0x9F (WHATWG's index-windows-1252).
    static let c1Table: [UInt32] = [
        0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
        0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
    ]

    /// The `encoding` of the XML declaration (`<?xml version="1.0"
    /// encoding="ISO-8859-1"?>`) that begins `body` (after a UTF-8 byte
    /// order mark), read from its bytes as ASCII; nil without one.
    static func declared(in body: [UInt8]) -> String? {
        var i = body.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        guard body[i...].starts(with: Array("<?xml".utf8)) else { return nil }
        i += 5
        // The declaration ends at "?>", within its first bytes.
        let end = min(body.count, i + 256)
        guard let close = (i..<end).first(where: { body[$0] == UInt8(ascii: "?") && $0 + 1 < end && body[$0 + 1] == UInt8(ascii: ">") }) else {
            return nil
        }
        let declaration = body[i..<close]
        let key = Array("encoding".utf8)
        guard let at = declaration.indices.first(where: { declaration[$0...].starts(with: key) }) else { return nil }
        var j = at + key.count
        func skipSpace() { while j < close, [0x20, 0x09, 0x0A, 0x0D].contains(body[j]) { j += 1 } }
        skipSpace()
        guard j < close, body[j] == UInt8(ascii: "=") else { return nil }
        j += 1
        skipSpace()
        guard j < close, body[j] == UInt8(ascii: "\"") || body[j] == UInt8(ascii: "'") else { return nil }
        let quote = body[j]
        j += 1
        guard let last = (j..<close).first(where: { body[$0] == quote }), last > j else { return nil }
        let value = body[j..<last]
        // EncName: [A-Za-z] ([A-Za-z0-9._] | '-')*
        guard value.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D }) else {
            return nil
        }
        return String(decoding: value, as: UTF8.self)
    }
}

/// A windows-1252 document handed to libxml2 as UTF-8 a buffer at a time
/// (`xmlReaderForIO`), as the WHATWG Encoding Standard decodes it: 0x80-0x9F
/// by its table (the five bytes it leaves undefined, 0x81, 0x8D, 0x8F, 0x90
/// and 0x9D, as the C1 controls of the same value, where iconv's CP1252
/// fails), every other byte as the code point of its value. The document
/// is never held twice: a hostile feed of 0x80s would be three times its
/// size as UTF-8.
final class Windows1252Input {
    private let body: [UInt8]
    private var position = 0
    /// The UTF-8 bytes of a character the last buffer had no room left for.
    private var carry: [UInt8] = []

    init(_ body: [UInt8]) { self.body = body }

    /// Fills up to `count` bytes of `buffer`; how many (0 at the end).
    func read(into buffer: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        var n = 0
        while n < count, !carry.isEmpty {
            buffer[n] = CChar(bitPattern: carry.removeFirst())
            n += 1
        }
        while n < count, position < body.count {
            let byte = body[position]
            position += 1
            if byte < 0x80 {
                buffer[n] = CChar(bitPattern: byte)
                n += 1
                continue
            }
            let scalar = byte <= 0x9F ? XMLEncoding.c1Table[Int(byte - 0x80)] : UInt32(byte)
            for (k, b) in String(Unicode.Scalar(scalar)!).utf8.enumerated() {
                if n < count {
                    buffer[n] = CChar(bitPattern: b)
                    n += 1
                } else {
                    carry.append(contentsOf: Array(String(Unicode.Scalar(scalar)!).utf8.dropFirst(k)))
                    break
                }
            }
        }
        return n
    }
}
