import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// The sample files under Tests/Fixtures/images (how each was made: README there).
enum ImageFixtures {
    static let directory: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<2 { url.deleteLastPathComponent() }
        return url.path + "/Fixtures/images"
    }()

    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
    }

    /// Every fixture and the type its bytes are.
    static let expected: [(String, ImageType)] = [
        ("sample.jpg", .jpeg), ("sample.png", .png), ("sample.gif", .gif), ("sample.webp", .webp),
        ("sample.bmp", .bmp), ("sample.avif", .avif), ("sample.svg", .svg), ("sample-prolog.svg", .svg),
        ("sample.ico", .ico), ("sample-png.ico", .ico), ("sample.cur", .cur),
        ("sample.tiff", .tiff), ("sample-mm.tiff", .tiff), ("sample.heic", .heic), ("sample-mif1.heif", .heif),
        ("sample.jp2", .jpeg2000), ("sample.j2k", .jpeg2000Codestream),
        ("sample.jxl", .jxl), ("sample-container.jxl", .jxl),
    ]
}

@Suite struct ImageFormatTests {
    @Test(arguments: ImageFixtures.expected)
    func realFilesAreRecognisedByTheirBytes(_ fixture: (String, ImageType)) throws {
        let bytes = try ImageFixtures.bytes(fixture.0)
        #expect(bytes.count < 4096, "fixtures stay small")
        #expect(ImageType.detect(bytes) == fixture.1, "\(fixture.0)")
    }

    @Test func everyTypeHasAnImageMIMEType() {
        let expected: [ImageType: String] = [
            .jpeg: "image/jpeg", .png: "image/png", .gif: "image/gif", .webp: "image/webp", .bmp: "image/bmp",
            .avif: "image/avif", .svg: "image/svg+xml", .ico: "image/vnd.microsoft.icon", .cur: "image/x-win-bitmap",
            .tiff: "image/tiff", .heic: "image/heic", .heif: "image/heif", .jpeg2000: "image/jp2",
            .jpeg2000Codestream: "image/j2c", .jxl: "image/jxl",
        ]
        for t in ImageType.allCases { #expect(t.mimeType == expected[t], "\(t)") }
    }

    /// The raw values are in every existing index log: they never change.
    @Test func rawValuesAreTheDocumentedOnes() throws {
        let documented: [(ImageType, UInt8)] = [
            (.jpeg, 1), (.png, 2), (.gif, 3), (.webp, 4), (.bmp, 5), (.avif, 6), (.svg, 7), (.ico, 8), (.cur, 9),
            (.tiff, 10), (.heic, 11), (.heif, 12), (.jpeg2000, 13), (.jpeg2000Codestream, 14), (.jxl, 15),
        ]
        #expect(documented.count == ImageType.allCases.count)
        for (t, raw) in documented {
            #expect(t.rawValue == raw)
            let record = LogRecord.rowObject(row: 1, hash: Hash128(of: [raw]), size: 10, type: t)
            #expect(try RecordCodec.decodePayload(RecordCodec.encode(record)[8...]) == record)
        }
        // The table in docs/storage-format.md names each value.
        var docs = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { docs.deleteLastPathComponent() }
        let text = try String(contentsOf: docs.appendingPathComponent("docs/storage-format.md"), encoding: .utf8)
        for (t, raw) in documented { #expect(text.contains("| \(raw) | \(t.mimeType) |"), "\(t)") }
    }

    // MARK: SVG

    static let svgRoot = #"<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>"#

    @Test(arguments: [
        svgRoot,
        "<svg>",
        "<svg\nxmlns=\"http://www.w3.org/2000/svg\"></svg>",
        "\u{FEFF}" + svgRoot,
        " \r\n\t" + svgRoot,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + svgRoot,
        "<?xml version=\"1.0\"?><?xml-stylesheet href=\"a.css\"?><!-- made by hand -->\n<!-- two > comments -->" + svgRoot,
        "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">" + svgRoot,
        "<!DOCTYPE svg [ <!ENTITY a \"x > y\"> <!ENTITY b 'z'> ]>\n" + svgRoot,
        "<s:svg xmlns:s=\"http://www.w3.org/2000/svg\"/>",
        "<!-- " + String(repeating: "x", count: 3900) + " -->" + svgRoot,
    ])
    func svgIsItsRootElementAfterTheProlog(_ text: String) {
        #expect(ImageType.detect(Array(text.utf8)) == .svg, "\(text.prefix(80))")
    }

    @Test(arguments: [
        "<!DOCTYPE html><html><body><svg></svg></body></html>",
        "<html><svg xmlns=\"http://www.w3.org/2000/svg\"/></html>",
        "<!DOCTYPE html>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
        "<!doctype html><svg>",
        "<SVG>",
        "<svgx>",
        "svg",
        "text <svg>",
        "<svg",
        "<!-- never closed <svg>",
        "<?xml version=\"1.0\"?>",
        "<:svg>",
    ])
    func notSVG(_ text: String) {
        #expect(ImageType.detect(Array(text.utf8)) == nil, "\(text)")
    }

    /// The root must start within `sniffLength` bytes; past it the file is refused.
    @Test func theRootMustStartWithinTheSniffedPrefix() {
        let comment = "<!-- " + String(repeating: "x", count: ImageType.sniffLength) + " -->"
        let bytes = Array((comment + Self.svgRoot).utf8)
        #expect(ImageType.detect(bytes) == nil)
        #expect(ImageType.describeNonImage(bytes) == "XML")
    }

    // MARK: Binary formats

    /// An `ftyp` box with these brands, then a `meta` box header.
    static func ftyp(_ major: String, _ compatible: [String]) -> [UInt8] {
        let size = 16 + 4 * compatible.count
        return [0, 0, 0, UInt8(size)] + Array("ftyp\(major)".utf8) + [0, 0, 0, 0] + compatible.flatMap { Array($0.utf8) }
            + [0, 0, 0, 0x20] + Array("meta".utf8)
    }

    @Test func isoBrandsDecideTheType() {
        #expect(ImageType.detect(Self.ftyp("avif", ["mif1", "miaf"])) == .avif)
        #expect(ImageType.detect(Self.ftyp("avis", ["msf1", "avif"])) == .avif)
        #expect(ImageType.detect(Self.ftyp("mif1", ["avif", "miaf"])) == .avif)
        #expect(ImageType.detect(Self.ftyp("mif1", ["mif1", "heic"])) == .heic)
        for brand in ["heic", "heix", "heim", "heis", "hevc", "hevx"] {
            #expect(ImageType.detect(Self.ftyp(brand, ["mif1"])) == .heic, "\(brand)")
        }
        #expect(ImageType.detect(Self.ftyp("msf1", ["msf1", "iso8"])) == .heif)
        #expect(ImageType.detect(Self.ftyp("mif1", [])) == .heif)
        #expect(ImageType.detect(Self.ftyp("isom", ["iso2", "avc1", "mp41"])) == nil)
        #expect(ImageType.describeNonImage(Self.ftyp("isom", ["iso2", "mp41"])) == "ISO media (brand isom)")
        #expect(ImageType.detect(Self.ftyp("qt  ", [])) == nil)
        // Compatible brands past the box's size are not the file's.
        #expect(ImageType.detect([0, 0, 0, 16] + Array("ftypisom".utf8) + [0, 0, 0, 0] + Array("avif".utf8)) == nil)
    }

    @Test func iconsNeedADirectoryThatPointsPastItself() throws {
        let ico = try ImageFixtures.bytes("sample.ico")
        var noImages = ico; noImages[4] = 0
        #expect(ImageType.detect(noImages) == nil)
        var insideDirectory = ico; insideDirectory[18] = 10
        #expect(ImageType.detect(insideDirectory) == nil)
        #expect(ImageType.detect(Array(ico.prefix(21))) == nil)
        #expect(ImageType.detect([0, 0, 1, 0, 1, 0] + [UInt8](repeating: 0, count: 16)) == nil)
    }

    @Test func bmpNeedsAKnownInfoHeader() throws {
        #expect(ImageType.detect(Array("BMW and other cars, a text file".utf8)) == nil)
        var bmp = try ImageFixtures.bytes("sample.bmp")
        #expect(ImageType.detect(bmp) == .bmp)
        bmp[14] = 41
        #expect(ImageType.detect(bmp) == nil)
    }

    @Test func tiffIncludesBigTIFF() {
        #expect(ImageType.detect([0x49, 0x49, 0x2B, 0x00, 0x08, 0x00, 0x00, 0x00]) == .tiff)
        #expect(ImageType.detect([0x4D, 0x4D, 0x00, 0x2B, 0x00, 0x08, 0x00, 0x00]) == .tiff)
        #expect(ImageType.detect([0x49, 0x49, 0x2A]) == nil)
    }

    // MARK: Refusals

    @Test func aRefusalNamesTheDeclaredTypeAndWhatTheBytesLookLike() {
        let html = Array("<!DOCTYPE html>\n<html><head><title>404</title></head></html>".utf8)
        #expect(ImageType.refusal(declaredContentType: "text/html", head: html) == "not an image: declared text/html, bytes look like HTML")
        #expect(ImageType.refusal(declaredContentType: "image/png", head: html) == "not an image: declared image/png, bytes look like HTML")
        #expect(ImageType.refusal(declaredContentType: "Text/HTML; charset=UTF-8", head: html) == "not an image: declared text/html, bytes look like HTML")
        #expect(ImageType.refusal(declaredContentType: nil, head: html) == "not an image: no Content-Type, bytes look like HTML")
        #expect(ImageType.refusal(declaredContentType: " ", head: html) == "not an image: no Content-Type, bytes look like HTML")
        #expect(ImageType.refusal(declaredContentType: "image/png", head: [UInt8]()) == "not an image: declared image/png, the body is empty")
        #expect(ImageType.refusal(declaredContentType: "x/\u{1B}[31m", head: html) == "not an image: declared x/\\x1b[31m, bytes look like HTML")
    }

    @Test(arguments: [
        ("<!DOCTYPE html><html>", "HTML"),
        ("<!doctype HTML>", "HTML"),
        ("\u{FEFF}\n<!-- banner -->\n<html lang=\"en\">", "HTML"),
        ("<?xml version=\"1.0\"?>\n<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Strict//EN\" \"x.dtd\">\n<html xmlns=\"http://www.w3.org/1999/xhtml\">", "HTML"),
        ("<head><title>x</title></head>", "HTML"),
        ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code></Error>", "XML (root <Error>)"),
        ("{\"error\": \"not found\"}", "JSON"),
        ("  [1, 2]", "JSON"),
        ("Not Found\n", "text"),
        ("caf\u{E9} \u{2028} na\u{EF}ve", "text"),
        ("%PDF-1.7\n", "a PDF document"),
        ("RIFF\u{0}\u{0}\u{0}\u{0}WAVEfmt ", "a RIFF file (WAVE)"),
    ])
    func describesWhatTheBytesLookLike(_ example: (String, String)) {
        #expect(ImageType.detect(Array(example.0.utf8)) == nil)
        #expect(ImageType.describeNonImage(Array(example.0.utf8)) == example.1, "\(example.0)")
    }

    @Test func binaryThatIsNoKnownFormat() {
        #expect(ImageType.describeNonImage([0x1F, 0x8B, 8, 0]) == "gzip data")
        #expect(ImageType.describeNonImage(Array("PK\u{3}\u{4}rest".utf8)) == "a ZIP archive")
        #expect(ImageType.describeNonImage([0x00, 0x01, 0x02, 0xFE, 0xFF]) == "unknown bytes")
        #expect(ImageType.describeNonImage([0xC3, 0x28]) == "unknown bytes")
        #expect(ImageType.describeNonImage([UInt8]()) == "an empty body")
        // A UTF-8 sequence cut by the end of the prefix is still text.
        let text = Array(String(repeating: "\u{E9}", count: ImageType.sniffLength).utf8)
        #expect(ImageType.describeNonImage(Array(text.prefix(ImageType.sniffLength + 1))) == "text")
    }
}

@Suite struct ObjectWriterTypeTests {
    private func written(_ bytes: [UInt8], chunk: Int, to store: Store) throws -> ObjectWriter {
        let w = try store.newObjectWriter(maxSize: 1 << 20)
        for start in stride(from: 0, to: bytes.count, by: chunk) {
            try bytes[start..<min(bytes.count, start + chunk)].withUnsafeBytes { try w.append($0) }
        }
        return w
    }

    /// The writer keeps enough of the body for an SVG whose root comes after a
    /// long comment, however the body was split into chunks.
    @Test func anSVGAfterAPrologIsStoredWhateverTheChunking() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let svg = Array(("<?xml version=\"1.0\"?>\n<!-- " + String(repeating: "c", count: 2000) + " -->\n" + ImageFormatTests.svgRoot).utf8)
        try store.replaceManifest([("a.svg", nil), ("b.svg", nil)], validators: Validators())
        let a = try store.commitObject(try written(svg, chunk: 7, to: store), rows: [(0, "a.svg")], declaredContentType: "text/plain")
        #expect(a.type == .svg)
        let b = try store.commitObject(try written(svg, chunk: 4096, to: store), rows: [(1, "b.svg")], declaredContentType: "image/svg+xml")
        #expect(b == a)
        store.close()
        let reopened = try Store(StoreConfiguration(directory: dir.path))
        defer { reopened.close() }
        #expect(reopened.row(0)?.object?.type == .svg)
    }

    /// The same bytes get the same decision and the same words whatever was declared.
    @Test func theDecisionDependsOnTheBytesOnly() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        try store.replaceManifest([("a", nil)], validators: Validators())
        let png = try ImageFixtures.bytes("sample.png")
        for declared in ["image/png", "text/plain", "text/html", "application/octet-stream", nil] {
            let ref = try store.commitObject(try written(png, chunk: 100, to: store), rows: [(0, "a")], declaredContentType: declared)
            #expect(ref.type == .png)
        }
        let html = Array("<!DOCTYPE html><html><body>Sorry</body></html>".utf8)
        for declared in ["image/png", "text/html"] {
            let w = try written(html, chunk: 5, to: store)
            do {
                _ = try store.commitObject(w, rows: [(0, "a")], declaredContentType: declared)
                Issue.record("HTML was stored")
            } catch {
                #expect("\(error)" == "not an image: declared \(declared), bytes look like HTML")
            }
        }
        // Without a declared type the message says only what the bytes are.
        do {
            _ = try store.commitObject(try written(html, chunk: 5, to: store), rows: [(0, "a")])
            Issue.record("HTML was stored")
        } catch {
            #expect("\(error)" == "not an image: bytes look like HTML")
        }
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty)
    }
}
