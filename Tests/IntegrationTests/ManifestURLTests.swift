import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// Manifest URLs written as people write them, fetched as a browser would.
@Suite struct ManifestURLTests {
    @Test func rawSpacesAndNonASCIIInAManifestURLAreFetched() throws {
        let origin = try Origin()
        let png = try origin.read("images/01-sunrise.png")
        let jpg = try origin.read("images/13-gradient.jpg")
        try FileManager.default.createDirectory(atPath: origin.root + "/images/sub dir", withIntermediateDirectories: false)
        try origin.write("images/my photo \u{E9}t\u{E9}.png", bytes: png)
        try origin.write("images/sub dir/\u{65E5}\u{672C} 1.jpg", bytes: jpg)
        let manifest: JSON = .array([
            .object([("url", .string("my photo \u{E9}t\u{E9}.png"))]),
            // The same file, already escaped: the same URL, one download.
            .object([("url", .string("my%20photo%20%C3%A9t%C3%A9.png"))]),
            // A backslash, a tab and surrounding spaces, as a browser forgives them.
            .object([("url", .string("  sub dir\\\u{65E5}\u{672C}\t 1.jpg \n"))]),
        ])
        try origin.write("images/manifest.json", bytes: manifest.encoded)
        let daemon = try Daemon(origin: origin)
        let answer = try daemon.call("prefetch", [("what", .string("images"))])
        #expect(answer["images"]?["failed"]?.int == 0, "\(answer)")
        #expect(answer["images"]?["downloaded"]?.int == 3, "\(answer)")

        let row0 = try daemon.call("get_image", [("row", num(0)), ("fetch", .bool(false))])["image"]
        let row1 = try daemon.call("get_image", [("row", num(1)), ("fetch", .bool(false))])["image"]
        let row2 = try daemon.call("get_image", [("row", num(2)), ("fetch", .bool(false))])["image"]
        #expect(row0?["url"]?.string == origin.base + "/images/my%20photo%20%C3%A9t%C3%A9.png")
        #expect(row1?["url"]?.string == row0?["url"]?.string)
        #expect(row2?["url"]?.string == origin.base + "/images/sub%20dir/%E6%97%A5%E6%9C%AC%201.jpg")
        #expect(row0?["hash"] == row1?["hash"] && row0?["type"]?.string == "image/png")
        #expect(row2?["type"]?.string == "image/jpeg")
        let path = row2?["path"]?.string ?? ""
        #expect(Array((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data()) == jpg)

        // What the origin saw: one request per distinct URL, each percent-encoded.
        let paths = try origin.requests().map(\.path).filter { !$0.hasSuffix("manifest.json") }
        #expect(paths.sorted() == ["/images/my%20photo%20%C3%A9t%C3%A9.png", "/images/sub%20dir/%E6%97%A5%E6%9C%AC%201.jpg"], "\(paths)")
    }
}
