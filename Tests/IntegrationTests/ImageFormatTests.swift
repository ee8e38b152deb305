import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// Every image format a browser opens, through the real daemon and the
/// Python origin (which declares a Content-Type from the file's extension).
@Suite struct ImageFormatServingTests {
    static let fixtures = Paths.packageRoot + "/Tests/Fixtures/images"

    /// The fixture files, the MIME type `get_image` must answer for each.
    static let formats: [(file: String, type: String)] = [
        ("sample.jpg", "image/jpeg"), ("sample.png", "image/png"), ("sample.gif", "image/gif"),
        ("sample.webp", "image/webp"), ("sample.bmp", "image/bmp"), ("sample.avif", "image/avif"),
        ("sample.svg", "image/svg+xml"), ("sample-prolog.svg", "image/svg+xml"),
        ("sample.ico", "image/vnd.microsoft.icon"), ("sample-png.ico", "image/vnd.microsoft.icon"),
        ("sample.cur", "image/x-win-bitmap"), ("sample.tiff", "image/tiff"), ("sample-mm.tiff", "image/tiff"),
        ("sample.heic", "image/heic"), ("sample-mif1.heif", "image/heif"),
        ("sample.jp2", "image/jp2"), ("sample.j2k", "image/j2c"),
        ("sample.jxl", "image/jxl"), ("sample-container.jxl", "image/jxl"),
    ]

    private static func fixture(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: fixtures + "/" + name)))
    }

    /// A manifest of `files` (relative URLs), written with the files into the origin.
    private static func serve(_ files: [(name: String, bytes: [UInt8])], on origin: Origin) throws {
        for f in files { try origin.write("images/" + f.name, bytes: f.bytes) }
        let manifest = JSON.array(files.map { .object([("url", .string($0.name)), ("description", .string($0.name))]) })
        try origin.write("images/manifest.json", bytes: manifest.encoded)
    }

    @Test func everyFormatIsStoredAndAnsweredWithItsType() throws {
        let origin = try Origin()
        try Self.serve(try Self.formats.map { ($0.file, try Self.fixture($0.file)) }, on: origin)
        let daemon = try Daemon(origin: origin)
        let answer = try daemon.call("prefetch", [("what", .string("images"))])
        #expect(answer["ok"]?.bool == true, "\(answer)")
        #expect(answer["images"]?["failed"]?.int == 0, "\(answer["failures"] ?? .null)")
        for (row, format) in Self.formats.enumerated() {
            let image = try daemon.call("get_image", [("row", num(row)), ("fetch", .bool(false))])["image"]
            #expect(image?["type"]?.string == format.type, "\(format.file): \(image ?? .null)")
            let path = image?["path"]?.string ?? ""
            #expect(Array((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data()) == (try Self.fixture(format.file)), "\(format.file)")
        }
        // The types are in the log: a restart answers the same without downloading.
        daemon.stop()
        let again = try Daemon(origin: nil, scratch: daemon.scratch)
        let list = try again.call("list_images")["images"]?.array ?? []
        #expect(list.map { $0["type"]?.string ?? "-" } == Self.formats.map(\.type))
    }

    /// The bytes decide, not the Content-Type: a PNG named .txt (text/plain)
    /// and an SVG named .txt are stored; an HTML page named .png (image/png)
    /// is refused, and so is one named .html, with messages naming both what
    /// was declared and what the bytes look like.
    @Test func theBytesDecideAndTheRefusalNamesTheDeclaredType() throws {
        let origin = try Origin()
        let html = Array("<!DOCTYPE html>\n<html><body>Sorry, try later</body></html>\n".utf8)
        try Self.serve([
            ("real-png.txt", try Self.fixture("sample.png")),
            ("drawing.txt", try Self.fixture("sample.svg")),
            ("error-page.png", html),
            ("error-page.html", html),
        ], on: origin)
        let daemon = try Daemon(origin: origin)
        let answer = try daemon.call("prefetch", [("what", .string("images"))])
        #expect(answer["images"]?["downloaded"]?.int == 2, "\(answer)")
        let image0 = try daemon.call("get_image", [("row", num(0)), ("fetch", .bool(false))])["image"]
        #expect(image0?["type"]?.string == "image/png")
        let image1 = try daemon.call("get_image", [("row", num(1)), ("fetch", .bool(false))])["image"]
        #expect(image1?["type"]?.string == "image/svg+xml")
        let failures = answer["failures"]?.array ?? []
        #expect(failures.map { $0["row"]?.int ?? -1 } == [2, 3])
        let message2 = failures.first { $0["row"]?.int == 2 }?["error"]?.string ?? ""
        let message3 = failures.first { $0["row"]?.int == 3 }?["error"]?.string ?? ""
        #expect(message2.hasSuffix("not an image: declared image/png, bytes look like HTML"), "\(message2)")
        #expect(message3.hasSuffix("not an image: declared text/html, bytes look like HTML"), "\(message3)")
        #expect(try daemon.objectFiles().count == 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/tmp").isEmpty)
    }
}
