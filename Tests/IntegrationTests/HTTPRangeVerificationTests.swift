import Foundation
import Testing
import CacheProtocol

/// Ranges of an object larger than one chunk (1 MiB) through the real
/// daemon and curl: the range is verified by the chunks it lies in
/// (docs/http.md, "Images and objects"); a damaged chunk outside it is not
/// read, one inside it is quarantined and the image downloaded again.
@Suite(.serialized) struct HTTPRangeVerificationTests {
    static let chunk = 1 << 20
    /// Three and a half chunks of a PNG.
    static let big: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        + (8..<(3 * chunk + chunk / 2)).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 11) }

    /// A daemon whose manifest ends with `big`; its row, and the object file's path.
    static func fixture() throws -> (HTTPFixture, row: Int, path: String) {
        let f = try HTTPFixture(prefetch: false)
        let root = f.nginx.files!.root + "/images"
        try Data(big).write(to: URL(fileURLWithPath: root + "/big.png"))
        var rows = try JSONParser.parse(Array(Data(contentsOf: URL(fileURLWithPath: root + "/manifest.json")))).array ?? []
        rows.append(.object([("url", .string("big.png")), ("description", .string("3.5 MiB"))]))
        try Data(JSON.array(rows).encoded).write(to: URL(fileURLWithPath: root + "/manifest.json"))
        let r = try cachectl(["prefetch"], socket: f.daemon.socket)
        guard r.status == 0 else { throw HarnessError("cachectl prefetch: \(r.stderr)") }
        let row = rows.count - 1
        let answer = try f.daemon.call("get_image", [("row", num(row))])
        guard let path = answer["image"]?["path"]?.string else { throw HarnessError("row \(row) is not cached: \(answer)") }
        return (f, row, path)
    }

    /// Flips the byte at `offset` of `path`, keeping its size.
    static func damage(_ path: String, at offset: Int) throws {
        chmod(path, 0o600)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        let byte = try handle.read(upToCount: 1)?.first ?? 0
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: [byte ^ 0x5A])
    }

    static func quarantined(_ f: HTTPFixture) throws -> Int? {
        try f.daemon.call("status")["counters"]?["quarantined"]?.int
    }

    @Test func rangesOfAMultiChunkObjectAreVerifiedByTheirChunks() throws {
        let (f, row, path) = try Self.fixture()
        let url = f.base + "/images/\(row)"
        let size = Self.big.count
        for (first, last) in [(0, 0), (Self.chunk - 2, Self.chunk + 1), (Self.chunk / 2, 3 * Self.chunk), (3 * Self.chunk, size - 1)] {
            let part = try f.curl(["-r", "\(first)-\(last)", url])
            #expect(part.heads.hasPrefix("HTTP/1.1 206 ") && part.heads.contains("Content-Range: bytes \(first)-\(last)/\(size)"),
                    "\(part.heads)")
            #expect(part.body == Array(Self.big[first...last]), "bytes \(first)-\(last)")
        }
        let tail = try f.curl(["-r", "-5", url])
        #expect(tail.body == Array(Self.big.suffix(5)))
        let whole = try f.curl([url])
        #expect(whole.heads.hasPrefix("HTTP/1.1 200 ") && whole.body == Self.big)

        // Damage in chunk 0: a range in chunk 3 does not read it and is served as stored.
        try Self.damage(path, at: 100)
        let far = try f.curl(["-r", "\(3 * Self.chunk + 1)-\(3 * Self.chunk + 9)", url])
        #expect(far.heads.hasPrefix("HTTP/1.1 206 ") && far.body == Array(Self.big[(3 * Self.chunk + 1)...(3 * Self.chunk + 9)]))
        #expect(try Self.quarantined(f) == 0)

        // A range over chunk 0 finds it: quarantined, downloaded again, and the good bytes sent.
        let near = try f.curl(["-r", "90-110", url])
        #expect(near.heads.hasPrefix("HTTP/1.1 206 ") && near.body == Array(Self.big[90...110]), "\(near.heads)")
        #expect(try Self.quarantined(f) == 1)
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == Self.big, "the download again replaced the file")
        let entries = try FileManager.default.contentsOfDirectory(atPath: f.daemon.store + "/quarantine")
        #expect(entries.count == 1, "\(entries)")
    }
}
