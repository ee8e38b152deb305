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

    /// HTTP: the variant's bytes with its hash as ETag, 304 for it, HEAD;
    /// bad queries are 400 naming what is allowed.
    @Test func httpServesAVariantLikeAnObject() throws {
        let nginx = try Self.origin([])
        let port = try unusedLocalPort()
        let daemon = try Self.daemon(nginx, ["--http-listen", "127.0.0.1:\(port)", "--variant-max-dimension", "512"])
        let base = "http://127.0.0.1:\(port)"
        let fixture = try HTTPFixtureless(base: base)
        let r = try fixture.curl(["\(base)/images/3?w=32&h=24&fit=cover&format=png"])
        #expect(r.heads.contains("200 OK") && r.heads.lowercased().contains("content-type: image/png"), "\(r.heads)")
        let h = try Self.header(r.body)
        #expect(h.width == 32 && h.height == 24 && h.loader == "pngload", "\(h)")
        let answer = try daemon.call("get_image", [("row", num(3)), Self.variant([("w", num(32)), ("h", num(24)), ("fit", .string("cover")), ("format", .string("png"))])])
        let hash = try #require(answer["image"]?["variant"]?["hash"]?.string)
        #expect(r.heads.contains("ETag: \"\(hash)\""), "the variant's hash is its ETag: \(r.heads)")
        let again = try fixture.curl(["-H", "If-None-Match: \"\(hash)\"", "\(base)/images/3?w=32&h=24&fit=cover&format=png"])
        #expect(again.heads.contains("304"), "\(again.heads)")
        let head = try fixture.curl(["-I", "\(base)/images/3?w=32&h=24&fit=cover&format=png"])
        #expect(head.heads.contains("Content-Length: \(r.body.count)"), "\(head.heads)")
        for (query, message) in [("w=0", "w is a decimal integer from 1 to 65535"), ("w=abc", "w is a decimal integer"),
                                 ("fit=fill", "fit is contain or cover"), ("format=gif", "format is one of jpeg, png, webp, avif"),
                                 ("w=513", "variant width 513 is out of range: 1 to 512 (variant-max-dimension)")] {
            let bad = try fixture.curl(["\(base)/images/3?\(query)"])
            #expect(bad.heads.contains("400"), "\(query): \(bad.heads)")
            #expect(String(decoding: bad.body, as: UTF8.self).contains(message), "\(query): \(String(decoding: bad.body, as: UTF8.self))")
        }
        let counters = try daemon.call("status")["counters"]
        #expect(counters?["variants_made"]?.int == 1, "\(String(describing: counters))")
        // Variant requests count in the variant counters; the original's one download is the one miss.
        #expect(counters?["hits"]?.int == 0 && counters?["misses"]?.int == 1, "\(String(describing: counters))")
    }

    /// Many clients asking at once for one variant get one decode; after a
    /// restart it is served from the store with no helper started.
    @Test func oneDecodeForEveryClientAndNoneAfterARestart() throws {
        let nginx = try Self.origin([])
        let scratch = Scratch()
        var daemon = try Self.daemon(nginx, scratch: scratch)
        _ = try daemon.call("get_image", [("row", num(5))])
        let ask = [("row", num(5)), Self.variant([("w", num(48)), ("format", .string("webp"))])]
        let hashes = Locked<[String]>([])
        let socket = daemon.socket
        onThreads(12) { _ in
            let client = try? Client(socketPath: socket)
            let answer = try? client?.call("get_image", ask)
            hashes.withLock { $0.append(answer?["image"]?["variant"]?["hash"]?.string ?? "none: \(String(describing: answer))") }
        }
        let all = hashes.withLock { $0 }
        #expect(all.count == 12 && Set(all).count == 1 && all[0].count == 32, "\(all)")
        var counters = try daemon.call("status")["counters"]
        #expect(counters?["variants_made"]?.int == 1, "one decode for twelve clients: \(String(describing: counters))")
        #expect(counters?["hits"]?.int == 0 && counters?["misses"]?.int == 1, "the plain get_image's download, no hit for the variants: \(String(describing: counters))")
        #expect(daemon.stop() == 0)

        daemon = try Self.daemon(nginx, scratch: scratch)
        let answer = try daemon.call("get_image", ask)
        #expect(answer["image"]?["variant"]?["hash"]?.string == all[0])
        counters = try daemon.call("status")["counters"]
        #expect(counters?["variants_made"]?.int == 0 && counters?["variant_hits"]?.int == 1 && counters?["hits"]?.int == 0,
                "\(String(describing: counters))")
        #expect(Self.helpers(of: daemon.pid).isEmpty, "no helper was started to serve a stored variant")
    }

    /// The pids of the daemon's `cached-variant` children.
    static func helpers(of daemon: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return stat.contains("(cached-variant)") && fields.count > 1 && Int32(fields[1]) == daemon
        }
    }

    /// cachectl get image ROW --width W ... -o FILE writes the variant's
    /// verified bytes; without -o it shows the variant after the row.
    @Test func cachectlWritesAVariant() throws {
        let nginx = try Self.origin([])
        let daemon = try Self.daemon(nginx)
        let scratch = Scratch()
        let out = scratch.path + "/thumb.avif"
        let r = try cachectl(["get", "image", "6", "--width", "48", "--height", "32", "--fit", "cover", "--format", "avif", "-o", out],
                             socket: daemon.socket)
        #expect(r.status == 0, "\(r)")
        let h = try Self.header(try FileSystem.read(out))
        #expect(h.width == 48 && h.height == 32 && h.loader == "heifload", "\(h)")
        let shown = try cachectl(["get", "image", "6", "--width", "48", "--height", "32", "--fit", "cover", "--format", "avif"], socket: daemon.socket)
        #expect(shown.stdout.contains("variant: 48 x 32 image/avif"), "\(shown.stdout)")
        for (args, message) in [(["--width", "0"], "--width takes a number of pixels"), (["--fit", "fill"], "--fit is contain or cover"),
                                (["--format", "gif"], "--format is one of jpeg, png, webp, avif")] {
            let bad = try cachectl(["get", "image", "6"] + args, socket: daemon.socket)
            #expect(bad.status == 2 && bad.stderr.contains(message), "\(args): \(bad)")
        }
        let misplaced = try cachectl(["get", "images", "--width", "40"], socket: daemon.socket)
        #expect(misplaced.status == 2 && misplaced.stderr.contains("go with get image ROW"), "\(misplaced)")
        #expect(try daemon.call("status")["counters"]?["variants_made"]?.int == 1, "shown and written: one variant")
    }

    /// variant-sizes: a size it does not list is refused naming those it does.
    /// Issue 33, point 4: a conversion (a format, a fit, an empty variant)
    /// keeps the image's own size, never the box of variant-max-dimension;
    /// a part asked for twice is refused, over the socket and over HTTP.
    @Test func aConversionKeepsTheImagesSizeAndARepeatedPartIsRefused() throws {
        let nginx = try Self.origin([("small.png", try FileSystem.read(Self.fixtures + "sample.png"))])
        let port = try unusedLocalPort()
        let daemon = try Self.daemon(nginx, ["--http-listen", "127.0.0.1:\(port)"])
        for members in [[("format", JSON.string("png"))], [("fit", JSON.string("cover"))], []] {
            let a = try daemon.call("get_image", [("row", num(16)), Self.variant(members)])
            let v = a["image"]?["variant"]
            #expect(v?["width"]?.int == 16 && v?["height"]?.int == 16, "sample.png is 16 x 16: \(members) gave \(a)")
        }
        // Asked for, a side is made larger.
        let up = try daemon.call("get_image", [("row", num(16)), Self.variant([("w", num(64))])])
        #expect(up["image"]?["variant"]?["width"]?.int == 64, "\(up)")
        let twice = try daemon.call("get_image", [("row", num(16)), Self.variant([("w", num(32)), ("w", num(64))])])
        #expect(twice["error"]?["code"]?.string == "bad_request" && twice["error"]?["message"]?.string == "\"variant\".w is given more than once", "\(twice)")
        let http = try SimpleHTTP.get(port: port, path: "/images/16?w=32&w=64")
        #expect(http.status == 400 && http.text.contains("w is given more than once"), "\(http.status) \(http.text)")
    }

    @Test func sizesOutsideTheAllowListAreRefused() throws {
        let nginx = try Self.origin([])
        let daemon = try Self.daemon(nginx, ["--variant-sizes", "192, 96"])
        let refused = try daemon.call("get_image", [("row", num(1)), Self.variant([("w", num(100))])])
        #expect(refused["error"]?["code"]?.string == "bad_request")
        #expect(refused["error"]?["message"]?.string == "variant width 100 is not an allowed size (variant-sizes: 96, 192)", "\(refused)")
        let fine = try daemon.call("get_image", [("row", num(1)), Self.variant([("w", num(96)), ("h", num(192))])])
        #expect(fine["image"]?["variant"]?["width"]?.int == 96, "\(fine)")
        let cli = try cachectl(["get", "image", "1", "--width", "100"], socket: daemon.socket)
        #expect(cli.status == 2 && cli.stderr.contains("variant-sizes: 96, 192"), "\(cli)")
    }

    /// A file made by the `vips` CLI (libvips-tools), such as a noise image.
    static func made(_ steps: [[String]], _ result: String, in scratch: Scratch) throws -> [UInt8] {
        try requireInstalled("/usr/bin/vips", package: "libvips-tools")
        for step in steps {
            let (status, output) = try runProgram("/usr/bin/vips", step.map { $0.replacingOccurrences(of: "DIR", with: scratch.path) })
            guard status == 0 else { throw HarnessError("vips \(step): \(output)") }
        }
        return try FileSystem.read(scratch.path + "/" + result)
    }

    /// Images a decoder must not be trusted with: each gets a clear error,
    /// the original stays served, the daemon and every other request go on.
    @Test func hostileImagesGetClearErrorsAndLoseNothing() throws {
        let scratch = Scratch()
        let jpeg = try Self.made([["gaussnoise", "DIR/n.v", "900", "700"], ["cast", "DIR/n.v", "DIR/u.v", "uchar"],
                                  ["jpegsave", "DIR/u.v", "DIR/n.jpg", "--Q", "90"]], "n.jpg", in: scratch)
        let hostile: [(String, [UInt8], String)] = [
            ("bomb.png", VariantHelperTests.declaredPNG(width: 100_000, height: 100_000), "100000 x 100000 pixels"),
            ("truncated.jpg", Array(jpeg.prefix(jpeg.count / 2)), "the image was refused"),
            ("junk.png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7919) },
             "the image was refused"),
        ]
        let nginx = try Self.origin(hostile.map { ($0.0, $0.1) })
        let daemon = try Self.daemon(nginx)
        for (i, (name, bytes, message)) in hostile.enumerated() {
            let row = 16 + i
            let answer = try daemon.call("get_image", [("row", num(row)), Self.variant([("w", num(64))])])
            #expect(answer["error"]?["code"]?.string == "upstream", "\(name): \(answer)")
            let text = answer["error"]?["message"]?.string ?? ""
            #expect(text.contains(message) && text.contains("row \(row)"), "\(name): \(text)")
            if name == "bomb.png" { #expect(text.contains("max-image-pixels 100000000"), "\(text)") }
            // The original is still there, verified, byte for byte.
            let original = try daemon.call("get_image", [("row", num(row))])
            let hash = try #require(original["image"]?["hash"]?.string)
            let path = try #require(original["image"]?["path"]?.string)
            #expect(try FileSystem.read(path) == bytes && hash.count == 32, "\(name)'s original")
            #expect(try daemon.call("verify")["corrupt"] == .array([]))
        }
        #expect(try daemon.call("ping")["ok"] == .bool(true))
        let fine = try daemon.call("get_image", [("row", num(2)), Self.variant([("w", num(64))])])
        #expect(fine["image"]?["variant"]?["width"]?.int == 64, "\(fine)")
        let counters = try daemon.call("status")["counters"]
        #expect(counters?["variant_failures"]?.int == 3 && counters?["variants_made"]?.int == 1, "\(String(describing: counters))")
        #expect(daemon.isRunning)
    }

    /// A helper killed mid-job (as a crash or the kernel's OOM killer would
    /// end it) fails that request only; the next gets a new helper. One
    /// past variant-timeout is killed the same way, and one past
    /// variant-memory fails with its request alone.
    @Test func aHelperKilledTooSlowOrOutOfMemoryFailsOneRequestOnly() throws {
        let scratch = Scratch()
        // An interlaced PNG cannot be decoded a few lines at a time: 9000 x 9000
        // pixels are decoded whole (243 MB), about a second of CPU.
        let big = try Self.made([["black", "DIR/b.v", "9000", "9000", "--bands", "3"],
                                 ["pngsave", "DIR/b.v", "DIR/big.png", "--interlace"]], "big.png", in: scratch)
        let nginx = try Self.origin([("big.png", big)])
        let daemon = try Self.daemon(nginx, ["--variant-helpers", "1"])
        _ = try daemon.call("get_image", [("row", num(2)), Self.variant([("w", num(20))])])  // the helper is warm
        let helper = try #require(Self.helpers(of: daemon.pid).first)
        let before = Self.cpuTicks(helper)
        _ = try daemon.call("get_image", [("row", num(16))])
        let slow = [("row", num(16)), Self.variant([("w", num(64))])]
        let answer = Locked<JSON?>(nil)
        let socket = daemon.socket
        let t = Thread { answer.withLock { $0 = try? Client(socketPath: socket).call("get_image", slow) } }
        t.start()
        #expect(waitUntil(20) { Self.cpuTicks(helper) > before + 20 }, "the helper at work on the big PNG")
        kill(helper, SIGKILL)
        #expect(waitUntil(20) { answer.withLock { $0 } != nil })
        let failed = answer.withLock { $0 } ?? .null
        #expect(failed["error"]?["code"]?.string == "internal", "\(failed)")
        #expect(failed["error"]?["message"]?.string?.contains("killed") == true, "\(failed)")
        let next = try daemon.call("get_image", [("row", num(3)), Self.variant([("w", num(64))])])
        #expect(next["image"]?["variant"]?["width"]?.int == 64, "a new helper made the next one: \(next)")
        #expect(!Self.helpers(of: daemon.pid).contains(helper))
        #expect(daemon.log.contains("variant helper \(helper) was killed (SIGKILL"), "logged with how it ended")
        // Asked again at once, the failure is remembered (for a minute), not decoded again by a new helper.
        let helpers = Self.helpers(of: daemon.pid)
        let again = try daemon.call("get_image", slow)
        #expect(again["error"]?["message"] == failed["error"]?["message"], "remembered: \(again)")
        #expect(Self.helpers(of: daemon.pid) == helpers, "no helper was started or replaced for it")

        for (setting, value, expected) in [("--variant-timeout", "0.2", "took longer than variant-timeout"),
                                           ("--variant-memory", "512M", "out of memory")] {
            let limited = try Self.daemon(nginx, [setting, value], scratch: Scratch())
            let late = try limited.call("get_image", slow)
            #expect(late["error"]?["code"]?.string == "internal" || late["error"]?["code"]?.string == "upstream", "\(setting): \(late)")
            #expect(late["error"]?["message"]?.string?.contains(expected) == true, "\(setting): \(late)")
            let small = try limited.call("get_image", [("row", num(3)), Self.variant([("w", num(32))])])
            #expect(small["image"]?["variant"] != nil, "\(setting): the next request is served: \(small)")
            #expect(limited.isRunning)
        }
    }

    /// Clock ticks of CPU a process has used (utime + stime).
    static func cpuTicks(_ pid: Int32) -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
        let f = stat[stat.index(after: close)...].split(separator: " ")
        return f.count > 12 ? (Int(f[11]) ?? 0) + (Int(f[12]) ?? 0) : 0
    }

    /// gc removes the variants of an image no row names any more.
    @Test func gcRemovesTheVariantsOfAnImageNoRowNames() throws {
        let nginx = try Self.origin([])
        let daemon = try Self.daemon(nginx)
        let made = try daemon.call("get_image", [("row", num(4)), Self.variant([("w", num(40))])])
        let path = try #require(made["image"]?["variant"]?["path"]?.string)
        #expect(try daemon.call("status")["variants"]?.int == 1)
        guard let files = nginx.files else { return }
        var manifest = try JSONParser.parse(files.bytes("images/manifest.json")).array ?? []
        manifest[4] = .object([("url", .string("01-sunrise.png")), ("description", .string("now the same as row 0"))])
        try Data(JSON.array(manifest).encoded).write(to: URL(fileURLWithPath: files.root + "/images/manifest.json"))
        #expect(try daemon.call("prefetch", [("what", .string("images"))])["ok"] == .bool(true))
        let gc = try daemon.call("gc")
        #expect(gc["removed"]?.int == 2, "row 4's old image and its variant: \(gc)")
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try daemon.call("status")["variants"]?.int == 0)
    }
}

/// curl against a daemon's HTTP port, without the nginx origin of `HTTPFixture`.
struct HTTPFixtureless {
    let base: String
    init(base: String) throws { self.base = base }

    func curl(_ arguments: [String]) throws -> (status: Int32, body: [UInt8], heads: String) {
        try requireInstalled("/usr/bin/curl", package: "curl")
        let scratch = Scratch()
        let body = scratch.path + "/body", heads = scratch.path + "/heads"
        let (status, _) = try runProgram("/usr/bin/curl", ["-sS", "--max-time", "30", "-o", body, "-D", heads] + arguments)
        let b = (try? Data(contentsOf: URL(fileURLWithPath: body))).map(Array.init) ?? []
        return (status, b, (try? String(contentsOfFile: heads, encoding: .utf8)) ?? "")
    }
}

/// A variant object whose bytes rot is what `verify` and reads find in any
/// object: set aside, and, no row naming it, made again from its original
/// (the same bytes: verify counts it repaired).
@Suite(.serialized) struct VariantRepairTests {
    @Test func aCorruptVariantIsMadeAgainFromItsOriginal() throws {
        let nginx = try VariantTests.origin([])
        let daemon = try VariantTests.daemon(nginx)
        let made = try daemon.call("get_image", [("row", num(5)), ("variant", .object([("w", num(50)), ("format", .string("png"))]))])
        let v = try #require(made["image"]?["variant"])
        let path = try #require(v["path"]?.string), hash = try #require(v["hash"]?.string)
        var bytes = try FileSystem.read(path)
        bytes[bytes.count / 2] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let verify = try daemon.call("verify")
        #expect(verify["corrupt"] == .array([.string(hash)]) && verify["repaired"]?.int == 1, "\(verify)")
        let again = try daemon.call("get_image", [("row", num(5)), ("variant", .object([("w", num(50)), ("format", .string("png"))]))])
        #expect(again["image"]?["variant"]?["hash"]?.string == hash, "the same bytes again: \(again)")
        #expect(try FileSystem.read(path) != bytes, "the good bytes are back under the name")
        #expect(try daemon.call("status")["counters"]?["variants_made"]?.int == 2)
    }
}

/// The daemon against a helper that lies (Tests/Fixtures/bad-helper.py,
/// put beside a copy of `cached` as its `cached-variant`): no size it
/// announces is allocated, no byte past its answer taken, no word of its
/// sandbox believed, no bytes of another format stored; the request fails
/// saying why, the helper is replaced, and the daemon goes on.
@Suite(.serialized) struct LyingHelperTests {
    /// Copies a program with `cp -p` in a child: this process never holds
    /// it open for writing, so no child another test spawns meanwhile can
    /// inherit that descriptor and make its exec fail with ETXTBSY.
    static func copyProgram(_ from: String, _ to: String) throws {
        let copied = try runProgram("/bin/cp", ["-p", from, to])
        guard copied.status == 0 else { throw HarnessError("cp \(from) \(to): \(copied.output)") }
    }

    static func daemon(mode: String, _ nginx: Nginx, _ arguments: [String] = []) throws -> Daemon {
        let scratch = Scratch()
        let bin = scratch.path + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try copyProgram(Paths.cached, bin + "/cached")
        try copyProgram(Paths.packageRoot + "/Tests/Fixtures/bad-helper.py", bin + "/cached-variant")
        try FileManager.default.copyItem(atPath: VariantTests.fixtures + "sample.png", toPath: bin + "/bad-helper.png")
        try Data((mode + "\n").utf8).write(to: URL(fileURLWithPath: bin + "/bad-helper.mode"))
        chmod(bin + "/cached-variant", 0o755)
        return try Daemon(origin: nil, arguments: ["--posts-url", nginx.postsURL, "--images-url", nginx.manifestURL] + arguments,
                          scratch: scratch, executable: bin + "/cached")
    }

    @Test(arguments: [("unsandboxed", "the helper is not sandboxed"), ("huge", "it announced 1099511627776 bytes, over the bound"),
                      ("extra", "bytes past its result"), ("wrongformat", "the variant helper's output is image/png, not webp"),
                      ("silent", "took longer than variant-timeout")])
    func aLyingHelperFailsItsRequestAndNothingElse(_ mode: String, _ message: String) throws {
        let nginx = try Nginx()
        let daemon = try Self.daemon(mode: mode, nginx, ["--variant-timeout", "1"])
        let answer = try daemon.call("get_image", [("row", num(2)), ("variant", .object([("w", num(40)), ("format", .string("webp"))]))])
        #expect(answer["error"]?["code"]?.string == "internal", "\(mode): \(answer)")
        #expect(answer["error"]?["message"]?.string?.contains(message) == true, "\(mode): \(answer)")
        #expect(try daemon.call("ping")["ok"] == .bool(true))
        #expect(try daemon.call("get_image", [("row", num(2))])["image"]?["hash"]?.string?.count == 32, "the original is served")
        #expect(try daemon.call("status")["variants"]?.int == 0, "nothing of it was stored")
        #expect(daemon.log.contains("variants: made by \(daemon.scratch.path)/bin/cached-variant"), "the helper beside the copy: \(daemon.log)")
    }
}

extension LyingHelperTests {
    /// As a user other than root (whose task limit the kernel does not
    /// check), a helper gets RLIMIT_NPROC: the user's tasks at its start and
    /// 64 more, so one a hostile image took over cannot take the tasks the
    /// daemon's threads need. The real helper, under the same limit, still
    /// makes its variants.
    @Test func aHelperCannotStartThreadsWithoutEnd() throws {
        try requireInstalled("/usr/bin/setpriv", package: "util-linux")
        guard getuid() == 0 else { print("[variant-threads] not root: the test runs the daemon as nobody, which needs root"); return }
        let nginx = try Nginx()
        for mode in ["threads", "real"] {
            let scratch = Scratch()
            chmod(scratch.path, 0o755)
            let home = scratch.path + "/nobody"
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
            let bin = home + "/bin"
            try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
            try LyingHelperTests.copyProgram(Paths.cached, bin + "/cached")
            if mode == "real" {
                try LyingHelperTests.copyProgram(Paths.binDir + "/cached-variant", bin + "/cached-variant")
            } else {
                try LyingHelperTests.copyProgram(Paths.packageRoot + "/Tests/Fixtures/bad-helper.py", bin + "/cached-variant")
                try FileManager.default.copyItem(atPath: VariantTests.fixtures + "sample.png", toPath: bin + "/bad-helper.png")
                try Data("threads\n".utf8).write(to: URL(fileURLWithPath: bin + "/bad-helper.mode"))
            }
            let (status, output) = try runProgram("/bin/chown", ["-R", "65534:65534", home])
            try #require(status == 0, "\(output)")
            let daemon = try Daemon(origin: nil, arguments: ["--posts-url", nginx.postsURL, "--images-url", nginx.manifestURL,
                                                             "--store", home + "/store", "--socket", home + "/sock"],
                                    scratch: scratch, waitReady: false,
                                    launcher: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"],
                                    executable: bin + "/cached")
            #expect(waitUntil(20) { (try? Client(socketPath: home + "/sock").call("ping"))?["ok"] == .bool(true) }, "\(daemon.log)")
            let answer = try Client(socketPath: home + "/sock").call("get_image", [("row", num(2)), ("variant", .object([("w", num(40))]))])
            if mode == "real" {
                #expect(answer["image"]?["variant"]?["width"]?.int == 40, "the real helper under the limit: \(answer)")
            } else {
                let text = answer["error"]?["message"]?.string ?? ""
                let started = Int(text.split(separator: " ").drop { $0 != "started" }.dropFirst().first ?? "") ?? -1
                #expect(started >= 0 && started < 100, "a helper's threads are bounded: \(text)")
                print("[variant-threads] the lying helper, as nobody: \(text)")
            }
            #expect(daemon.isRunning)
        }
    }
}
