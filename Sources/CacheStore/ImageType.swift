/// The image formats the store accepts, recognised by their bytes alone.
///
/// Whatever Content-Type the origin declares, only bytes that are an image
/// are stored, and the same bytes get the same answer from any server: an
/// HTML error page served as `image/png` is refused, a PNG served as
/// `text/plain` is accepted. The raw values are written to the index log
/// (docs/storage-format.md): new formats get new values, none is renumbered.
public enum ImageType: UInt8, Sendable, CaseIterable {
    case jpeg = 1, png = 2, gif = 3, webp = 4, bmp = 5
    /// AVIF still images and sequences (ISO BMFF brands `avif`, `avis`).
    case avif = 6
    /// SVG: an `<svg` root element after an optional XML prologue.
    case svg = 7
    /// A Windows icon (ICONDIR type 1).
    case ico = 8
    /// A Windows cursor (ICONDIR type 2).
    case cur = 9
    /// TIFF, little- or big-endian, classic or BigTIFF.
    case tiff = 10
    /// HEIF with HEVC images (brands `heic`, `heix`, `heim`, `heis`, `hevc`, `hevx`, ...).
    case heic = 11
    /// HEIF with other codings (only the structural brands `mif1`, `msf1`, ...).
    case heif = 12
    /// JPEG 2000 in its JP2 file format (the `jP  ` signature box).
    case jpeg2000 = 13
    /// A raw JPEG 2000 codestream (SOC and SIZ markers, `FF4FFF51`).
    case jpeg2000Codestream = 14
    /// JPEG XL, as a bare codestream (`FF0A`) or in its ISO BMFF container.
    case jxl = 15

    /// How many leading bytes `detect` looks at, at most: an SVG's root
    /// element must start within them (after any prologue, comments and
    /// doctype). Every other format is known by its first 32 bytes.
    public static let sniffLength = 4096

    /// The MIME type served to clients.
    public var mimeType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .png: "image/png"
        case .gif: "image/gif"
        case .webp: "image/webp"
        case .bmp: "image/bmp"
        case .avif: "image/avif"
        case .svg: "image/svg+xml"
        case .ico: "image/vnd.microsoft.icon"
        case .cur: "image/x-win-bitmap"
        case .tiff: "image/tiff"
        case .heic: "image/heic"
        case .heif: "image/heif"
        case .jpeg2000: "image/jp2"
        case .jpeg2000Codestream: "image/j2c"
        case .jxl: "image/jxl"
        }
    }

    /// The type the bytes of `head` (the start of a body) are, or nil.
    /// Only the first `sniffLength` bytes are looked at.
    public static func detect(_ head: some Collection<UInt8>) -> ImageType? {
        let b = Sniffer(Array(head.prefix(sniffLength)))
        if b.starts(0xFF, 0xD8, 0xFF) { return .jpeg }
        if b.starts(0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A) { return .png }
        if b.starts("GIF87a") || b.starts("GIF89a") { return .gif }
        if b.starts("RIFF") && b.starts("WEBP", at: 8) { return .webp }
        if b.starts("BM"), let dib = b.uint32LE(at: 14), [12, 16, 40, 52, 56, 64, 108, 124].contains(dib) { return .bmp }
        if b.starts(0x49, 0x49, 0x2A, 0x00) || b.starts(0x4D, 0x4D, 0x00, 0x2A) { return .tiff }
        if b.starts(0x49, 0x49, 0x2B, 0x00) || b.starts(0x4D, 0x4D, 0x00, 0x2B) { return .tiff }
        if b.starts(0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A) { return .jpeg2000 }
        if b.starts(0xFF, 0x4F, 0xFF, 0x51) { return .jpeg2000Codestream }
        if b.starts(0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A) { return .jxl }
        if b.starts(0xFF, 0x0A) { return .jxl }
        if let brands = b.isoBrands() { return isoImageType(brands) }
        if let t = b.iconType() { return t }
        let prologue = b.prologue()
        if case .element(let name)? = prologue.root, isSVGName(name), prologue.doctype.map(isSVGName) ?? true { return .svg }
        return nil
    }

    /// The image type an ISO BMFF file with these `ftyp` brands (major
    /// first) holds: the major brand decides when it names a coding, then the
    /// first compatible brand that does; HEIF's structural brands alone mean
    /// `heif`. Nil for other ISO media (MP4 video and the like).
    static func isoImageType(_ brands: [[UInt8]]) -> ImageType? {
        func coding(_ brand: [UInt8]) -> ImageType? {
            switch String(decoding: brand, as: UTF8.self) {
            case "avif", "avis": .avif
            case "heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs": .heic
            default: nil
            }
        }
        if let major = brands.first, let t = coding(major) { return t }
        for brand in brands.dropFirst() { if let t = coding(brand) { return t } }
        let structural: Set<String> = ["mif1", "mif2", "msf1", "miaf"]
        if brands.contains(where: { structural.contains(String(decoding: $0, as: UTF8.self)) }) { return .heif }
        return nil
    }

    private static func isSVGName(_ name: [UInt8]) -> Bool {
        let svg = Array("svg".utf8)
        if name == svg { return true }
        // A namespace prefix: `<s:svg xmlns:s="http://www.w3.org/2000/svg">`.
        guard let colon = name.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return false }
        return Array(name[(colon + 1)...]) == svg
    }

    /// A short description of what bytes that are not an image look like,
    /// for error messages: "HTML", "XML", "JSON", "text", "a PDF document",
    /// ..., or "unknown bytes".
    // Long because it is a table: one signature per line, in the order they
    // are tried; a split would only scatter the table.
    public static func describeNonImage(_ head: some Collection<UInt8>) -> String {
        let b = Sniffer(Array(head.prefix(sniffLength)))
        if b.bytes.isEmpty { return "an empty body" }
        let prologue = b.prologue()
        if let doctype = prologue.doctype, String(decoding: doctype, as: UTF8.self).lowercased() == "html" { return "HTML" }
        switch prologue.root {
        case .element(let name)?:
            if htmlElements.contains(String(decoding: name, as: UTF8.self).lowercased()) { return "HTML" }
            return "XML (root <\(Printable.escaped(name, limit: 40))>)"
        case .noRoot?: return "XML"
        case nil: break
        }
        let first = b.bytes.first { !Sniffer.isXMLSpace($0) }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") { return "JSON" }
        if b.starts(0x1F, 0x8B) { return "gzip data" }
        if b.starts("%PDF-") { return "a PDF document" }
        if b.starts("PK") && (b.starts("\u{03}\u{04}", at: 2) || b.starts("\u{05}\u{06}", at: 2)) { return "a ZIP archive" }
        if let brands = b.isoBrands() {
            return "ISO media (brand \(Printable.escaped(brands.first ?? [], limit: 4)))"
        }
        if b.starts("RIFF"), b.bytes.count >= 12 { return "a RIFF file (\(Printable.escaped(Array(b.bytes[8..<12]), limit: 4)))" }
        if looksLikeText(b.bytes) { return "text" }
        return "unknown bytes"
    }

    /// The error message for a body that is not an image: what the origin
    /// declared it to be and what its bytes look like, for example
    /// `not an image: declared text/html, bytes look like HTML`.
    ///
    /// `declaredContentType` is the Content-Type header as received (nil when
    /// there was none); only its media type is shown, lowercased, with any
    /// unprintable byte escaped. Nothing here decides whether the body is an
    /// image: `detect` does, from the bytes alone.
    public static func refusal(declaredContentType: String?, head: some Collection<UInt8>) -> String {
        "not an image: " + refusalDetail(declared: declaration(declaredContentType), head: head)
    }

    /// How the declared Content-Type reads in a refusal: `declared text/html`
    /// or `no Content-Type`.
    static func declaration(_ contentType: String?) -> String {
        guard let contentType else { return "no Content-Type" }
        var media = Array(contentType.utf8)
        if let semicolon = media.firstIndex(of: UInt8(ascii: ";")) { media = Array(media[..<semicolon]) }
        while let last = media.last, last == 0x20 || last == 0x09 { media.removeLast() }
        while let first = media.first, first == 0x20 || first == 0x09 { media.removeFirst() }
        if media.isEmpty { return "no Content-Type" }
        return "declared " + Printable.escaped(media.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, limit: 80)
    }

    /// The part of a refusal after `not an image: `; `declared` is nil when
    /// the caller does not know what the origin declared.
    static func refusalDetail(declared: String?, head: some Collection<UInt8>) -> String {
        let looks = head.isEmpty ? "the body is empty" : "bytes look like \(describeNonImage(head))"
        guard let declared else { return looks }
        return "\(declared), \(looks)"
    }

    /// Elements whose appearance as the first element means an HTML page.
    private static let htmlElements: Set<String> = [
        "html", "head", "body", "title", "meta", "link", "script", "style", "div", "p", "span", "table",
        "h1", "h2", "h3", "h4", "h5", "h6", "pre", "center", "br", "hr", "a", "img", "form", "iframe", "main", "header",
    ]

    /// Valid UTF-8 (a sequence cut at the end of the prefix allowed) without
    /// control characters other than tab, LF, FF and CR.
    private static func looksLikeText(_ bytes: [UInt8]) -> Bool {
        var body = bytes[...]
        // Drop a multi-byte sequence the prefix may have cut in two.
        if let lead = body.lastIndex(where: { $0 & 0xC0 != 0x80 }), body[lead] >= 0xC0 {
            let need = body[lead] >= 0xF0 ? 4 : body[lead] >= 0xE0 ? 3 : 2
            if body.endIndex - lead < need { body = body[..<lead] }
        }
        var decoder = UTF8()
        var input = body.makeIterator()
        while true {
            switch decoder.decode(&input) {
            case .scalarValue(let s):
                if (s.value < 0x20 && ![0x09, 0x0A, 0x0C, 0x0D].contains(s.value)) || s.value == 0x7F { return false }
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}

/// Reads the fixed-position fields of a body's first bytes, and walks an XML
/// prologue (BOM, whitespace, `<?...?>`, `<!--...-->`, `<!DOCTYPE ...>`) to
/// its first element. Every read is bounds-checked against the prefix.
struct Sniffer {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func starts(_ signature: UInt8..., at offset: Int = 0) -> Bool { starts(signature, at: offset) }

    func starts(_ text: String, at offset: Int = 0) -> Bool { starts(Array(text.utf8), at: offset) }

    func starts(_ signature: [UInt8], at offset: Int = 0) -> Bool {
        guard offset >= 0, bytes.count >= offset + signature.count else { return false }
        return bytes[offset..<offset + signature.count].elementsEqual(signature)
    }

    func uint16LE(at i: Int) -> UInt16? {
        guard i >= 0, bytes.count >= i + 2 else { return nil }
        return UInt16(bytes[i]) | UInt16(bytes[i + 1]) << 8
    }

    func uint32LE(at i: Int) -> UInt32? {
        guard let lo = uint16LE(at: i), let hi = uint16LE(at: i + 2) else { return nil }
        return UInt32(lo) | UInt32(hi) << 16
    }

    func uint32BE(at i: Int) -> UInt32? {
        guard i >= 0, bytes.count >= i + 4 else { return nil }
        return bytes[i..<i + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The brands of a leading ISO BMFF `ftyp` box, major brand first, or nil
    /// when the bytes do not start with one.
    func isoBrands() -> [[UInt8]]? {
        guard starts("ftyp", at: 4), let size = uint32BE(at: 0), size >= 16, size % 4 == 0, bytes.count >= 16 else { return nil }
        var brands = [Array(bytes[8..<12])]
        var i = 16
        while i + 4 <= min(Int(size), bytes.count) {
            brands.append(Array(bytes[i..<i + 4]))
            i += 4
        }
        return brands
    }

    /// `.ico` or `.cur` when the bytes start with an ICONDIR whose first entry
    /// points at image data after the directory.
    func iconType() -> ImageType? {
        guard starts(0, 0), bytes.count >= 22, bytes[3] == 0, bytes[2] == 1 || bytes[2] == 2,
              let count = uint16LE(at: 4), count > 0,
              let size = uint32LE(at: 14), size > 0,
              let offset = uint32LE(at: 18), offset >= 6 + 16 * UInt32(count) else { return nil }
        if bytes[2] == 1 {
            // Colour planes: 0 or 1 in an icon (a cursor keeps its hotspot there).
            guard let planes = uint16LE(at: 10), planes <= 1 else { return nil }
            return .ico
        }
        return .cur
    }

    static func isXMLSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }

    /// What follows the prologue: the first element's name, or `noRoot` when
    /// the prologue is markup so far but no element starts within the prefix.
    enum Root: Equatable { case element([UInt8]), noRoot }

    /// The first element (nil when the bytes are not markup at all) and the
    /// name the doctype gives, if there is a doctype.
    func prologue() -> (root: Root?, doctype: [UInt8]?) {
        var i = starts(0xEF, 0xBB, 0xBF) ? 3 : 0
        var doctype: [UInt8]?
        var sawMarkup = false
        func find(_ end: String, from start: Int) -> Int? {
            let e = Array(end.utf8)
            var j = start
            while j + e.count <= bytes.count {
                if bytes[j] == e[0] && bytes[j..<j + e.count].elementsEqual(e) { return j }
                j += 1
            }
            return nil
        }
        while true {
            while i < bytes.count && Self.isXMLSpace(bytes[i]) { i += 1 }
            guard i < bytes.count else { return (sawMarkup ? .noRoot : nil, doctype) }
            guard bytes[i] == UInt8(ascii: "<") else { return (nil, doctype) }
            if starts("<?", at: i) {
                guard let end = find("?>", from: i + 2) else { return (.noRoot, doctype) }
                i = end + 2
            } else if starts("<!--", at: i) {
                guard let end = find("-->", from: i + 4) else { return (.noRoot, doctype) }
                i = end + 3
            } else if bytes.count >= i + 9, String(decoding: bytes[i..<i + 9], as: UTF8.self).uppercased() == "<!DOCTYPE" {
                var j = i + 9
                while j < bytes.count && Self.isXMLSpace(bytes[j]) { j += 1 }
                let nameStart = j
                while j < bytes.count && !Self.isXMLSpace(bytes[j]) && bytes[j] != UInt8(ascii: ">") && bytes[j] != UInt8(ascii: "[") { j += 1 }
                doctype = Array(bytes[nameStart..<j])
                // To the closing `>`, past quoted literals and an internal subset.
                var quote: UInt8?
                var depth = 0
                while j < bytes.count {
                    let c = bytes[j]
                    if let q = quote { if c == q { quote = nil } }
                    else if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") { quote = c }
                    else if c == UInt8(ascii: "[") { depth += 1 }
                    else if c == UInt8(ascii: "]") { depth -= 1 }
                    else if c == UInt8(ascii: ">") && depth <= 0 { break }
                    j += 1
                }
                guard j < bytes.count else { return (.noRoot, doctype) }
                i = j + 1
            } else {
                var j = i + 1
                while j < bytes.count && !Self.isXMLSpace(bytes[j]) && bytes[j] != UInt8(ascii: ">") && bytes[j] != UInt8(ascii: "/") { j += 1 }
                // The name must end inside the prefix, and be a name at all.
                guard j < bytes.count, j > i + 1, Self.isNameStart(bytes[i + 1]) else { return (sawMarkup ? .noRoot : nil, doctype) }
                return (.element(Array(bytes[i + 1..<j])), doctype)
            }
            sawMarkup = true
        }
    }

    private static func isNameStart(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == UInt8(ascii: "_") || b == UInt8(ascii: ":") || b >= 0x80
    }
}
