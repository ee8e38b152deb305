import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// Image variants through the real daemon and its `cached-variant` helpers,
/// the originals served by a real nginx (docs/protocol.md and docs/http.md,
/// "Image variants"; docs/operations.md, "Image variants"). Every size is
/// read back with libvips' own `vipsheader`, never with our code.
@Suite(.serialized) struct VariantTests {
    /// The fixtures of every format the store accepts, as rows 16 on.
    static let formats = ["sample.jpg", "sample.png", "sample.gif", "sample.webp", "sample.bmp", "sample.avif", "sample.svg",
                          "sample.ico", "sample-png.ico", "sample.cur", "sample.tiff", "sample-mm.tiff", "sample.heic",
                          "sample-mif1.heif", "sample.jp2", "sample.j2k", "sample.jxl", "sample-container.jxl", "sample-prolog.svg"]

    static let fixtures: String = Paths.packageRoot + "/Tests/Fixtures/images/"

    /// nginx serving Examples/origin (rows 0 to 15) and `extra` files (name, bytes) as rows 16 on.
    static func origin(_ extra: [(String, [UInt8])]) throws -> Nginx {
        let nginx = try Nginx()
        guard let files = nginx.files else { throw HarnessError("nginx has no files") }
        var manifest = try JSONParser.parse(files.bytes("images/manifest.json")).array ?? []
        for (name, bytes) in extra {
            try Data(bytes).write(to: URL(fileURLWithPath: files.root + "/images/v-" + name))
            chmod(files.root + "/images/v-" + name, 0o644)
            manifest.append(.object([("url", .string("v-" + name)), ("description", .string(name))]))
        }
        try Data(JSON.array(manifest).encoded).write(to: URL(fileURLWithPath: files.root + "/images/manifest.json"))
        return nginx
    }

    static func daemon(_ nginx: Nginx, _ arguments: [String] = [], scratch: Scratch = Scratch()) throws -> Daemon {
        try Daemon(origin: nil, arguments: ["--posts-url", nginx.postsURL, "--images-url", nginx.manifestURL] + arguments, scratch: scratch)
    }

    static func variant(_ members: [(String, JSON)]) -> (String, JSON) { ("variant", .object(members)) }

    /// The width, height and loader `vipsheader` reports for `bytes`.
    static func header(_ bytes: [UInt8]) throws -> (width: Int, height: Int, loader: String) {
        try requireInstalled("/usr/bin/vipsheader", package: "libvips-tools")
        let scratch = Scratch()
        let path = scratch.path + "/variant"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        func field(_ name: String) throws -> String {
            let (status, output) = try runProgram("/usr/bin/vipsheader", ["-f", name, path])
            guard status == 0 else { throw HarnessError("vipsheader -f \(name): \(output)") }
            // The value is the last line: libvips may warn first (heifload: ignoring nclx profile).
            return output.split(separator: "\n").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        }
        return (Int(try field("width")) ?? -1, Int(try field("height")) ?? -1, try field("vips-loader"))
    }

    static let loaders = ["jpeg": "jpegload", "png": "pngload", "webp": "webpload", "avif": "heifload"]

    /// Each format's original gets each kind of variant, of the size asked.
    @Test func everyFormatTheStoreAcceptsGetsItsVariants() throws {
        let nginx = try Self.origin(try Self.formats.map { ($0, try FileSystem.read(Self.fixtures + $0)) })
        let daemon = try Self.daemon(nginx)
        for (i, name) in Self.formats.enumerated() {
            let row = 16 + i
            for (members, format, size) in [([("w", num(40))], nil as String?, (40, 40)),
                                            ([("w", num(30)), ("h", num(20)), ("fit", .string("cover")), ("format", .string("png"))], "png", (30, 20)),
                                            ([("h", num(24)), ("format", .string("avif"))], "avif", (24, 24)),
                                            ([("w", num(20)), ("h", num(10)), ("format", .string("jpeg"))], "jpeg", (10, 10))] {
                let answer = try daemon.call("get_image", [("row", num(row)), Self.variant(members)])
                guard let v = answer["image"]?["variant"], let path = v["path"]?.string else {
                    Issue.record("\(name) \(members): \(answer)")
                    continue
                }
                let h = try Self.header(try FileSystem.read(path))
                #expect(h.width == size.0 && h.height == size.1, "\(name) \(members): \(h)")
                #expect(v["width"]?.int == size.0 && v["height"]?.int == size.1, "\(name): \(v)")
                let expected = format ?? (["sample.jpg": "jpeg", "sample.png": "png", "sample.webp": "webp", "sample.avif": "avif"][name] ?? "webp")
                #expect(h.loader == Self.loaders[expected], "\(name) \(members): \(h.loader)")
                #expect(v["type"]?.string == "image/\(expected)", "\(name): \(v)")
            }
        }
        let counters = try daemon.call("status")["counters"]
        #expect(counters?["variants_made"]?.int == 4 * Self.formats.count && counters?["variant_failures"]?.int == 0, "\(String(describing: counters))")
    }
}
