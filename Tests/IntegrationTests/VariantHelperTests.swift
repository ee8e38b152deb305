#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import CacheSystem
import CLinux

/// The variant helper, `cached-variant`, run directly as the daemon runs it
/// (`--serve`, pipes, a clean environment): every format the store accepts
/// to every variant format, checked with `vipsheader` (libvips-tools, not our
/// code); bombs, truncated and garbage inputs refused; the sandbox in place
/// on every thread and holding; memory bounded and flat over many jobs.
/// Figures for the bench are printed with a `[variant-helper]` prefix.
@Suite struct VariantHelperTests {
    static let fixtures = Paths.packageRoot + "/Tests/Fixtures/images"

    /// The loader `vipsheader` names for each variant format.
    static let formats: [(format: HelperJob.Format, loader: String)] = [
        (.jpeg, "jpegload"), (.png, "pngload"), (.webp, "webpload"), (.avif, "heifload"),
    ]

    /// Every fixture (one per format the store accepts, CUR included) to
    /// every variant format, as a 40-pixel-wide `contain` and a 30 x 20
    /// `cover`: made, and `vipsheader` reads the size the helper said, in
    /// the format asked.
    @Test func everyFixtureToEveryFormat() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.fixtures).filter { $0.hasPrefix("sample") }.sorted()
        #expect(names.count >= 19, "\(names)")
        let helper = try HelperUnderTest()
        let scratch = Scratch()
        var made: [(path: String, size: String, loader: String)] = []
        for name in names {
            let source = try FileSystem.read(Self.fixtures + "/" + name)
            for (format, loader) in Self.formats {
                for (width, height, fit) in [(40, 0, HelperJob.Fit.contain), (30, 20, .cover)] {
                    let job = HelperJob(format: format, fit: fit, width: width, height: height)
                    let answer = try helper.run(job, source)
                    let size = height == 0 ? (40, 40) : (30, 20) // the fixtures are 16 x 16
                    #expect(answer.status == 0 && answer.width == size.0 && answer.height == size.1,
                            "\(name) to \(format) \(width)x\(height): \(answer)")
                    guard answer.status == 0 else { continue }
                    let path = scratch.path + "/\(name)-\(format)-\(width)x\(height)"
                    try Data(answer.bytes).write(to: URL(fileURLWithPath: path))
                    made.append((path, "\(size.0)x\(size.1) uchar", loader))
                }
            }
        }
        let headers = try Self.vipsheader(made.map(\.path))
        #expect(headers.count == made.count)
        for file in made {
            let line = headers[file.path] ?? "(no line)"
            #expect(line.hasPrefix(file.size + ",") && line.hasSuffix(", " + file.loader), "\(file.path): \(line)")
        }
        #expect(try helper.finish() == 0)
    }

    /// A cursor (which ImageMagick does not recognise by its bytes) decodes
    /// to the same pixels as the PNG it was made from.
    @Test func aCursorDecodesToItsImagesPixels() throws {
        let helper = try HelperUnderTest()
        let scratch = Scratch()
        for name in ["sample.cur", "sample.png"] {
            let answer = try helper.run(HelperJob(format: .png, width: 16), try FileSystem.read(Self.fixtures + "/" + name))
            try #require(answer.status == 0, "\(name): \(answer)")
            try Data(answer.bytes).write(to: URL(fileURLWithPath: scratch.path + "/" + name + ".png"))
        }
        let steps = [["extract_band", "DIR/sample.cur.png", "DIR/cur.v", "0", "--n", "3"],
                     ["subtract", "DIR/cur.v", "DIR/sample.png.png", "DIR/d.v"], ["abs", "DIR/d.v", "DIR/e.v"]]
        try Self.vips(steps, in: scratch)
        let largest = try Self.vipsOutput(["max", scratch.path + "/e.v"])
        #expect(Double(largest.trimmingCharacters(in: .whitespacesAndNewlines)) == 0, "largest difference: \(largest)")
    }

    /// A 300 x 200 photo to a 40-pixel-wide variant is 40 x 27; with EXIF
    /// orientation 6 (rotate 90°) it is 40 x 60. Grey, CMYK and 16-bit
    /// originals become 8-bit sRGB, an alpha channel is flattened for JPEG
    /// and kept for WebP, and no metadata (EXIF, ICC profile) is left.
    @Test func orientationColourAndMetadata() throws {
        let scratch = Scratch()
        let photo = try Self.photoJPEG(width: 300, height: 200, in: scratch)
        try Self.vips([["colourspace", "DIR/photo.jpg", "DIR/grey.jpg", "b-w"], ["colourspace", "DIR/photo.jpg", "DIR/cmyk.v", "cmyk"],
                       ["jpegsave", "DIR/cmyk.v", "DIR/cmyk.jpg", "--strip"], ["jpegsave", "DIR/cmyk.v", "DIR/cmyk-profile.jpg"],
                       ["colourspace", "DIR/photo.jpg", "DIR/rgb16.png", "rgb16"], ["bandjoin_const", "DIR/photo.jpg", "DIR/rgba.png", "128"],
                       ["jpegsave", "DIR/photo.jpg", "DIR/profile.jpg", "--profile", "srgb"]], in: scratch)
        let helper = try HelperUnderTest()
        let plain = try helper.run(HelperJob(format: .png, width: 40), photo)
        let rotated = try helper.run(HelperJob(format: .png, width: 40), Self.withOrientation(6, photo))
        #expect((plain.status, plain.width, plain.height) == (0, 40, 27), "\(plain)")
        #expect((rotated.status, rotated.width, rotated.height) == (0, 40, 60), "\(rotated)")
        let cases: [(source: String, format: HelperJob.Format, expected: String)] = [
            ("grey.jpg", .png, "uchar, 3 bands, srgb"), ("cmyk.jpg", .png, "uchar, 3 bands, srgb"),
            ("cmyk-profile.jpg", .webp, "uchar, 3 bands, srgb"),
            ("rgb16.png", .png, "uchar, 3 bands, srgb"), ("rgba.png", .jpeg, "uchar, 3 bands, srgb"),
            ("rgba.png", .webp, "uchar, 4 bands, srgb"), ("profile.jpg", .jpeg, "uchar, 3 bands, srgb"),
        ]
        var paths: [String] = []
        for (i, c) in cases.enumerated() {
            let answer = try helper.run(HelperJob(format: c.format, width: 40), try FileSystem.read(scratch.path + "/" + c.source))
            try #require(answer.status == 0, "\(c.source): \(answer)")
            let path = scratch.path + "/out\(i)"
            try Data(answer.bytes).write(to: URL(fileURLWithPath: path))
            paths.append(path)
        }
        let headers = try Self.vipsheader(paths)
        for (c, path) in zip(cases, paths) {
            #expect(headers[path]?.contains(c.expected) == true, "\(c.source) to \(c.format): \(headers[path] ?? "-")")
            let fields = try Self.vipsOutput(["-a", path], tool: "/usr/bin/vipsheader")
            #expect(!fields.contains("exif-data") && !fields.contains("icc-profile-data") && !fields.contains("orientation"),
                    "\(c.source) to \(c.format) keeps metadata: \(fields)")
        }
    }

    /// A PNG whose header declares 100,000 x 100,000 pixels is refused by its
    /// header, at once, naming max-image-pixels; the helper goes on.
    @Test func aDecompressionBombIsRefusedByItsHeader() throws {
        let helper = try HelperUnderTest()
        let start = Date()
        let answer = try helper.run(HelperJob(format: .webp, width: 96), Self.declaredPNG(width: 100_000, height: 100_000))
        let seconds = Date().timeIntervalSince(start)
        #expect(answer.status == 1, "\(answer)")
        #expect(answer.text == "image is 100000 x 100000 pixels (10000 megapixels), over max-image-pixels 100000000 (100 megapixels)",
                "\(answer.text)")
        #expect(seconds < 2, "took \(seconds) s")
        let fixture = try helper.run(HelperJob(format: .webp, width: 96), try FileSystem.read(Self.fixtures + "/sample.png"))
        #expect(fixture.status == 0, "\(fixture)")
    }

    /// A real JPEG of a few hundred KB cut in half, garbage, a PDF and a
    /// PostScript file (whose loaders are not the store's formats': poppler
    /// and ImageMagick never see them) are refused with libvips's reason;
    /// an SVG naming local files and the network still makes a variant
    /// (librsvg cannot open them); a result over the daemon's bound fails
    /// (status 2: the size asked, not the image, is at fault). The helper
    /// answers the next job after each.
    @Test func badInputsAreRefusedWithTheReason() throws {
        let scratch = Scratch()
        let photo = try Self.photoJPEG(width: 1600, height: 1000, in: scratch)
        try #require(photo.count > 200_000, "the photo is \(photo.count) bytes")
        let svg = Array(("<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" width=\"64\" height=\"64\">"
            + "<image width=\"64\" height=\"64\" xlink:href=\"file:///etc/hostname\"/><image width=\"9\" height=\"9\" href=\"http://127.0.0.1:9/x.png\"/>"
            + "<text x=\"2\" y=\"30\" font-family=\"serif\">text</text></svg>").utf8)
        let cases: [(name: String, source: [UInt8], job: HelperJob, status: UInt8, message: String)] = [
            ("truncated JPEG", Array(photo.prefix(photo.count / 2)), HelperJob(format: .webp, width: 96), 1,
             "decoding failed: VipsJpeg: Premature end of input file"),
            ("garbage", (0..<4096).map { _ in UInt8.random(in: 0...255) }, HelperJob(format: .webp, width: 96), 1,
             "not an image this helper decodes: VipsForeignLoad: buffer is not in a known format"),
            ("PDF", Array("%PDF-1.4\n1 0 obj << >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n".utf8), HelperJob(format: .webp, width: 96), 1,
             "not an image this helper decodes: the bytes are for libvips's pdfload_buffer, not a format of the store"),
            ("PostScript", Array("%!PS-Adobe-3.0\n/x 1 def showpage\n".utf8), HelperJob(format: .webp, width: 96), 1,
             "not an image this helper decodes: the bytes are for libvips's magickload_buffer, not a format of the store"),
            ("SVG with files and the network", svg, HelperJob(format: .png, width: 64), 0, ""),
            ("a result over the bound", photo, HelperJob(format: .png, width: 1000, maxResult: 1000), 2, "over the 1000 bytes the daemon takes"),
        ]
        let helper = try HelperUnderTest()
        for c in cases {
            let answer = try helper.run(c.job, c.source)
            #expect(answer.status == c.status, "\(c.name): \(answer)")
            #expect(c.status == 0 || answer.text.hasSuffix(c.message) || answer.text == c.message, "\(c.name): \(answer.text)")
            let next = try helper.run(HelperJob(format: .jpeg, width: 20), try FileSystem.read(Self.fixtures + "/sample.gif"))
            #expect(next.status == 0, "after \(c.name): \(next)")
        }
        #expect(try helper.finish() == 0)
    }

    /// The end of input before a job is a clean exit; a header that is not
    /// one, or input that ends inside a job, exits 2 with the reason on
    /// standard error.
    @Test func brokenStreamsEndTheHelper() throws {
        let clean = try HelperUnderTest()
        #expect(try clean.finish() == 0)
        let badMagic = try HelperUnderTest()
        try badMagic.write(Array("XXXX".utf8) + [UInt8](repeating: 0, count: 44))
        #expect(try badMagic.finish() == 2)
        #expect(badMagic.standardError.contains("broken job header: not a job header"), "\(badMagic.standardError)")
        let badVersion = try HelperUnderTest()
        var header = HelperJob(format: .png, width: 8).encoded(sourceLength: 0)
        header[4] = 9
        try badVersion.write(header)
        #expect(try badVersion.finish() == 2)
        #expect(badVersion.standardError.contains("job version 9"), "\(badVersion.standardError)")
        let shortSource = try HelperUnderTest()
        try shortSource.write(HelperJob(format: .png, width: 8).encoded(sourceLength: 1000) + [1, 2, 3])
        #expect(try shortSource.finish() == 2)
        #expect(shortSource.standardError.contains("the input ends inside a source (3 of 1000 bytes)"), "\(shortSource.standardError)")
    }

    /// After the start, opening a file for writing or reading, making an
    /// internet or a Unix socket, signalling the parent and executing a
    /// program are all refused.
    @Test func theProbeShowsEveryAttemptDenied() throws {
        let scratch = Scratch()
        let pipe = try closeOnExecPipe()
        let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
        let pid: pid_t
        do {
            defer { close(pipe.write); close(null) }
            pid = try spawnVariantHelper(["--probe-sandbox", scratch.path], stdin: null, stdout: pipe.write, stderr: pipe.write)
        }
        let output = String(decoding: (try? FileDescriptor(rawValue: pipe.read).readToEnd()) ?? [], as: UTF8.self)
        close(pipe.read)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        #expect(describeWaitStatus(status).text == "exit status 0", "\(output)")
        let lines = output.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("cached-variant:") }
        #expect(lines == ["open-write", "open-read", "socket-inet", "socket-unix", "kill-parent", "execve"].map { "\($0): denied (EPERM)" },
                "\(output)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/probe"))
    }

    /// A serving helper has seccomp in filter mode and no_new_privs on every
    /// thread, and holds only standard input, output and error.
    @Test func aServingHelperIsSandboxedOnEveryThread() throws {
        let helper = try HelperUnderTest()
        // A job first, so that libvips's worker threads exist.
        #expect(try helper.run(HelperJob(format: .webp, width: 32), try FileSystem.read(Self.fixtures + "/sample.jpg")).status == 0)
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(helper.pid)/task")
        #expect(tasks.count > 1, "threads: \(tasks)")
        for task in tasks {
            let status = try String(contentsOfFile: "/proc/\(helper.pid)/task/\(task)/status", encoding: .utf8)
            #expect(status.contains("Seccomp:\t2\n") && status.contains("NoNewPrivs:\t1\n"), "thread \(task): \(status)")
        }
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(helper.pid)/fd").sorted()
        #expect(descriptors == ["0", "1", "2"])
        #expect(try helper.finish() == 0)
    }

    /// A helper whose address space is limited (by `prlimit` once it is
    /// ready, as the daemon limits it), given a 50-megapixel interlaced PNG
    /// (Adam7 is decoded whole into memory: 144 MiB), answers an error or
    /// dies, never hangs or answers made: at 200 MiB (less than the libraries
    /// already take: the source's own allocation fails), and at 64 MiB more
    /// than it has plus the source (the decode's fails). A helper that
    /// answered takes the next job.
    @Test func aHelperOutOfAddressSpaceFailsAndDoesNotHang() throws {
        try requireInstalled("/usr/bin/prlimit", package: "util-linux")
        let scratch = Scratch()
        try Self.vips([["xyz", "DIR/xy.v", "1000", "1000"], ["linear", "DIR/xy.v", "DIR/l.v", "0.2 0.25", "0 0"],
                       ["bandjoin_const", "DIR/l.v", "DIR/rgb.v", "100"], ["cast", "DIR/rgb.v", "DIR/u.v", "uchar"],
                       ["resize", "DIR/u.v", "DIR/big.png[compression=1,interlace]", "7.1"]], in: scratch)
        let png = try FileSystem.read(scratch.path + "/big.png")
        for tight in [false, true] {
            let helper = try HelperUnderTest()
            let size = Self.statusField(helper.pid, "VmSize") ?? 0
            let limit = tight ? 200 << 20 : size + png.count + 64 << 20
            let (status, output) = try runProgram("/usr/bin/prlimit", ["--pid", String(helper.pid), "--as=\(limit)"])
            try #require(status == 0, "prlimit: \(output)")
            let start = Date()
            let answer = try? helper.run(HelperJob(format: .webp, width: 96), png, timeout: 60)
            let seconds = Date().timeIntervalSince(start)
            let ended = answer == nil && helper.waitForExit(seconds: 10)
            print("[variant-helper] 50 MP interlaced PNG under RLIMIT_AS \(limit >> 20) MiB (VmSize \(size >> 20) MiB): "
                  + (answer.map { "status \($0.status): \($0.text)" } ?? "no answer, \(helper.howItEnded)")
                  + " after \(String(format: "%.1f", seconds)) s")
            #expect(answer.map { $0.status != 0 } ?? true, "the variant was made: \(String(describing: answer))")
            #expect(answer != nil || ended, "the helper neither answered nor ended")
            #expect(helper.standardError.count < 10_000, "stderr: \(helper.standardError.prefix(1000))")
            if answer != nil {
                let next = try helper.run(HelperJob(format: .png, width: 20), try FileSystem.read(Self.fixtures + "/sample.png"))
                #expect(next.status == 0, "\(next)")
            }
        }
    }

    /// A crash (SIGSEGV) or the CPU limit (SIGXCPU) ends a serving helper
    /// at once, by that signal, with next to nothing on standard error: no
    /// crash handler runs inside the sandbox (Swift's looped there, writing
    /// gigabytes).
    @Test func aCrashEndsTheHelperAtOnce() throws {
        for signal in [SIGSEGV, SIGXCPU] {
            let helper = try HelperUnderTest()
            #expect(try helper.run(HelperJob(format: .png, width: 8), try FileSystem.read(Self.fixtures + "/sample.png")).status == 0)
            kill(helper.pid, signal)
            #expect(helper.waitForExit(seconds: 5), "signal \(signal): \(helper.howItEnded)")
            #expect(helper.howItEnded.hasPrefix("ended by signal \(signal);"), "\(helper.howItEnded)")
            #expect(helper.standardError.count < 1000, "\(helper.standardError.prefix(1000))")
        }
    }

    /// 500 jobs in a row on one helper all succeed, and its resident memory
    /// after the last is within 8 MiB of what it was after the 100th.
    @Test func fiveHundredJobsInARowAndTheHelperDoesNotGrow() throws {
        let scratch = Scratch()
        let photo = try Self.photoJPEG(width: 640, height: 480, in: scratch)
        let sources = [photo, try FileSystem.read(Self.fixtures + "/sample.png"), try FileSystem.read(Self.fixtures + "/sample.gif")]
        let helper = try HelperUnderTest()
        var failures: [String] = []
        var afterHundred = 0
        let start = Date()
        for i in 0..<500 {
            let format = Self.formats[i % 3].format // jpeg, png, webp: AVIF's encoder is the slow one
            let answer = try helper.run(HelperJob(format: format, width: 48 + i % 7), sources[i % sources.count])
            if answer.status != 0 || answer.width != 48 + i % 7 { failures.append("job \(i): \(answer)") }
            if i == 99 { afterHundred = Self.statusField(helper.pid, "VmRSS") ?? 0 }
        }
        let after = Self.statusField(helper.pid, "VmRSS") ?? 0
        print("[variant-helper] 500 small jobs in \(String(format: "%.1f", Date().timeIntervalSince(start))) s; "
              + "VmRSS after 100: \(afterHundred >> 10) KiB, after 500: \(after >> 10) KiB")
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        #expect(afterHundred > 0 && after - afterHundred < 8 << 20, "grew from \(afterHundred) to \(after) bytes")
        #expect(try helper.finish() == 0)
    }

    /// The bench's figure: a fresh helper's peak resident memory for one
    /// 50-megapixel JPEG made into a 96-pixel WebP. The JPEG is a grainy
    /// 1600 x 1000 photo scaled by 5.625 without smoothing: 9000 x 5625,
    /// about 9 MB, as a camera's would be.
    @Test func peakMemoryOfAFiftyMegapixelJPEG() throws {
        let scratch = Scratch()
        _ = try Self.photoJPEG(width: 1600, height: 1000, in: scratch)
        try Self.vips([["resize", "DIR/photo.jpg", "DIR/big.jpg[Q=85]", "5.625", "--kernel", "nearest"]], in: scratch)
        let big = try FileSystem.read(scratch.path + "/big.jpg")
        let helper = try HelperUnderTest()
        let warm = Self.statusField(helper.pid, "VmHWM") ?? 0
        let start = Date()
        let answer = try helper.run(HelperJob(format: .webp, width: 96), big)
        let seconds = Date().timeIntervalSince(start)
        let peak = Self.statusField(helper.pid, "VmHWM") ?? 0
        #expect(answer.status == 0 && answer.width == 96 && answer.height == 60, "\(answer)")
        print("[variant-helper] 50.6 MP JPEG (\(big.count >> 20) MiB) to a 96-pixel WebP: peak RSS \(peak >> 20) MiB "
              + "(\(warm >> 20) MiB after the warm-up), \(String(format: "%.2f", seconds)) s")
        #expect(peak > 0 && peak < 512 << 20, "peak \(peak) bytes")
        #expect(try helper.finish() == 0)
    }
}

// MARK: - Images for the tests

extension VariantHelperTests {
    /// Runs `vips` steps in `scratch` (DIR in an argument is its path).
    static func vips(_ steps: [[String]], in scratch: Scratch) throws {
        try requireInstalled("/usr/bin/vips", package: "libvips-tools")
        for step in steps {
            let (status, output) = try runProgram("/usr/bin/vips", step.map { $0.replacingOccurrences(of: "DIR", with: scratch.path) })
            guard status == 0 else { throw HarnessError("vips \(step.joined(separator: " ")): \(output)") }
        }
    }

    /// A photo-like JPEG (gradients and grain, quality 90: about 0.4 bytes
    /// a pixel) at `scratch/photo.jpg`, and its bytes.
    static func photoJPEG(width: Int, height: Int, in scratch: Scratch) throws -> [UInt8] {
        let w = String(width), h = String(height)
        try vips([["xyz", "DIR/xy.v", w, h], ["linear", "DIR/xy.v", "DIR/l.v", "\(200.0 / Double(width)) \(180.0 / Double(height))", "20 40"],
                  ["bandjoin_const", "DIR/l.v", "DIR/rgb.v", "90"], ["gaussnoise", "DIR/n.v", w, h, "--sigma", "10", "--mean", "0"],
                  ["add", "DIR/rgb.v", "DIR/n.v", "DIR/photo.v"], ["cast", "DIR/photo.v", "DIR/u.v", "uchar"],
                  ["copy", "DIR/u.v", "DIR/photo.jpg[Q=90]", "--interpretation", "srgb"]], in: scratch)
        return try FileSystem.read(scratch.path + "/photo.jpg")
    }

    /// `jpeg` with an EXIF segment holding only an orientation tag.
    static func withOrientation(_ orientation: UInt16, _ jpeg: [UInt8]) -> [UInt8] {
        func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        // TIFF header, one IFD entry (0x0112 SHORT 1 = orientation), no next IFD.
        let tiff = Array("II".utf8) + le16(42) + le32(8) + le16(1) + le16(0x0112) + le16(3) + le32(1) + le32(UInt32(orientation)) + le32(0)
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        let length = UInt16(payload.count + 2)
        return Array(jpeg.prefix(2)) + [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload + Array(jpeg.dropFirst(2))
    }

    /// A PNG whose IHDR declares `width` x `height` (8-bit RGB), with a
    /// small IDAT and correct CRCs.
    static func declaredPNG(width: UInt32, height: UInt32) -> [UInt8] {
        func be(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) } }
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + data
            return be(UInt32(data.count)) + body + be(crc32(body))
        }
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", be(width) + be(height) + [8, 2, 0, 0, 0])
            + chunk("IDAT", [0x78, 0x9C, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01]) + chunk("IEND", [])
    }

    /// CRC-32 (ISO 3309), as PNG's chunks carry it.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes {
            c ^= UInt32(b)
            for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        }
        return ~c
    }

    /// `vipsheader`'s line for each path, by path (its warnings, on standard error, left out).
    static func vipsheader(_ paths: [String]) throws -> [String: String] {
        var out: [String: String] = [:]
        for line in try vipsOutput(paths, tool: "/usr/bin/vipsheader").split(separator: "\n") {
            guard let colon = line.range(of: ": ") else { continue }
            out[String(line[..<colon.lowerBound])] = String(line[colon.upperBound...])
        }
        return out
    }

    /// A libvips tool's standard output (its standard error dropped); throws when it fails.
    static func vipsOutput(_ arguments: [String], tool: String = "/usr/bin/vips") throws -> String {
        try requireInstalled(tool, package: "libvips-tools")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw HarnessError("\(tool) \(arguments) exited \(process.terminationStatus)") }
        return String(decoding: output, as: UTF8.self)
    }

    /// A `/proc/PID/status` field in bytes (`VmRSS`, `VmHWM`, `VmSize`).
    static func statusField(_ pid: Int32, _ name: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }.map { $0 * 1024 }
        }
        return nil
    }
}

// MARK: - The helper and its messages

/// A job's header as VariantWire lays it out, written here byte by byte:
/// the test target does not link CacheVariant, and the layout is checked
/// against the helper independently of the daemon's encoder.
struct HelperJob: CustomStringConvertible {
    enum Format: UInt8 { case jpeg = 1, png = 2, webp = 4, avif = 6 }
    enum Fit: UInt8 { case contain = 1, cover = 2 }
    var format: Format
    var fit: Fit = .contain
    var width: Int
    var height: Int = 0
    var maxDimension: Int = 2048
    var maxPixels: UInt64 = 100_000_000
    var maxResult: UInt64 = 64 << 20

    var description: String { "\(format) \(width)x\(height) \(fit)" }

    /// The 48-byte header for a source of `sourceLength` bytes.
    func encoded(sourceLength: Int) -> [UInt8] {
        func le(_ v: UInt64, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) } }
        return Array("CVRQ".utf8) + [1, format.rawValue, fit.rawValue, 0] + le(UInt64(width), 4) + le(UInt64(height), 4)
            + le(UInt64(maxDimension), 4) + le(0, 4) + le(maxPixels, 8) + le(maxResult, 8) + le(UInt64(sourceLength), 8)
    }
}

/// A result: the status (0 made, 1 refused, 2 failed), the size, the bytes.
struct HelperAnswer: CustomStringConvertible {
    var status: UInt8
    var width: Int
    var height: Int
    var bytes: [UInt8]
    /// The bytes as the message they are when the status is not 0.
    var text: String { String(decoding: bytes, as: UTF8.self) }
    var description: String { "status \(status) \(width)x\(height) \(status == 0 ? "\(bytes.count) bytes" : text)" }
}

/// Starts `cached-variant` with `arguments` and a clean environment, its
/// standard input, output and error on the descriptors given, by
/// `posix_spawn` as the daemon does. Not with Foundation's `Process`: it
/// learns that a child ended when a descriptor the child inherited closes,
/// which the helper does at its start (it closes everything above 2), and
/// then blocks its one watching thread in `waitpid` until the helper really
/// ends, and with it every other `Process` of the test run.
func spawnVariantHelper(_ arguments: [String], stdin: Int32, stdout: Int32, stderr: Int32) throws -> pid_t {
    let path = Paths.binDir + "/cached-variant"
    try requireInstalled(path, package: "(swift build --product cached-variant)")
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for (from, to) in [(stdin, Int32(0)), (stdout, 1), (stderr, 2)] { posix_spawn_file_actions_adddup2(&actions, from, to) }
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for p in argv { free(p) } }
    let environment: [UnsafeMutablePointer<CChar>?] = [nil]
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, &actions, nil, argv, environment)
    guard rc == 0 else { throw HarnessError("posix_spawn \(path): errno \(rc)") }
    return pid
}

/// A pipe whose two ends close on exec (other tests start programs meanwhile).
func closeOnExecPipe() throws -> (read: Int32, write: Int32) {
    var fds: [Int32] = [-1, -1]
    guard clinux_pipe_cloexec(&fds) == 0 else { throw HarnessError("pipe2: errno \(errno)") }
    return (fds[0], fds[1])
}

/// How a child ended, from `waitpid`'s status: "exit status N" or "signal N".
func describeWaitStatus(_ status: Int32) -> (exited: Bool, code: Int32, text: String) {
    let signal = status & 0x7F
    return signal == 0 ? (true, (status >> 8) & 0xFF, "exit status \((status >> 8) & 0xFF)") : (false, signal, "signal \(signal)")
}

/// One `cached-variant --serve`, started as the daemon starts it (a clean
/// environment, pipes on standard input and output), its standard error
/// kept in a file. Ready when constructed.
final class HelperUnderTest {
    let pid: pid_t
    private var input: Int32
    private let output: Int32
    private let scratch = Scratch()
    /// waitpid's status once reaped.
    private var ended: Int32?

    init() throws {
        // A helper that dies while its source is being written must give EPIPE, not kill the test.
        signal(SIGPIPE, SIG_IGN)
        let toHelper = try closeOnExecPipe(), fromHelper = try closeOnExecPipe()
        let errors = open(scratch.path + "/stderr", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        defer {
            close(toHelper.read)
            close(fromHelper.write)
            close(errors)
        }
        input = toHelper.write
        output = fromHelper.read
        do {
            pid = try spawnVariantHelper(["--serve"], stdin: toHelper.read, stdout: fromHelper.write, stderr: errors)
        } catch {
            close(toHelper.write)
            close(fromHelper.read)
            throw error
        }
        let ready = try read(8, timeout: 30)
        guard ready == Array("CVOK".utf8) + [1, 0, 0, 0] else { throw HarnessError("not ready: \(ready), \(standardError)") }
    }

    deinit {
        if ended == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
        if input >= 0 { close(input) }
        close(output)
    }

    /// What the helper wrote on standard error so far (its first 64 KiB).
    var standardError: String {
        guard let file = FileHandle(forReadingAtPath: scratch.path + "/stderr") else { return "" }
        defer { try? file.close() }
        return String(decoding: file.readData(ofLength: 64 << 10), as: UTF8.self)
    }

    /// Sends a job and its source, and reads its result within `timeout` seconds.
    func run(_ job: HelperJob, _ source: [UInt8], timeout: Double = 60) throws -> HelperAnswer {
        try write(job.encoded(sourceLength: source.count) + source)
        let head = try read(24, timeout: timeout)
        guard Array(head[0..<4]) == Array("CVRS".utf8) else { throw HarnessError("not a result: \(head)") }
        func le(_ at: Int, _ n: Int) -> Int { (0..<n).reduce(0) { $0 | Int(head[at + $1]) << (8 * $1) } }
        let bytes = try read(le(16, 8), timeout: timeout)
        return HelperAnswer(status: head[4], width: le(8, 4), height: le(12, 4), bytes: bytes)
    }

    /// Writes raw bytes to the helper's standard input.
    func write(_ bytes: [UInt8]) throws {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(input, $0.baseAddress! + done, bytes.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw HarnessError("writing to the helper: errno \(errno)") }
            done += n
        }
    }

    /// Reads exactly `count` bytes from the helper's standard output.
    private func read(_ count: Int, timeout: Double) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout)
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            var p = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            let left = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
            guard poll(&p, 1, left) > 0 else { throw HarnessError("no answer within \(timeout) s (\(done) of \(count) bytes)") }
            let n = out.withUnsafeMutableBytes { Glibc.read(output, $0.baseAddress! + done, count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw HarnessError("the helper's output ended (\(done) of \(count) bytes); \(howItEnded)") }
            done += n
        }
        return out
    }

    /// Closes its standard input and waits for it to exit: its exit status
    /// (128 + N when a signal N ended it).
    func finish() throws -> Int32 {
        close(input)
        input = -1
        guard waitForExit(seconds: 30), let status = ended else { throw HarnessError("the helper did not exit") }
        let how = describeWaitStatus(status)
        return how.exited ? how.code : 128 + how.code
    }

    /// Waits up to `seconds` for the helper to end (and reaps it); whether it did.
    func waitForExit(seconds: Double) -> Bool {
        waitUntil(seconds) {
            if ended != nil { return true }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { ended = status }
            return ended != nil
        }
    }

    /// How it ended, for messages.
    var howItEnded: String {
        _ = waitForExit(seconds: 0)
        guard let status = ended else { return "still running" }
        return "ended by \(describeWaitStatus(status).text); stderr: \(standardError)"
    }
}
