import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// docs/storage-format.md, "The scrub's state": `scrub.state` written
/// durably, read back, and a damaged one reported (never followed as a link).
@Suite struct ScrubStateTests {
    static let running = ScrubState(
        current: ScrubState.Pass(started: 1_764_000_000, position: Hash128(high: 0x0123_4567_89ab_cdef, low: 42),
                                 totals: ScrubTotals(objects: 7, bytes: 123_456, corrupt: 1, unreadable: 2, missing: 3)),
        last: ScrubState.Finished(started: 1_763_000_000, ended: 1_763_000_900,
                                  totals: ScrubTotals(objects: 15, bytes: 25_000, corrupt: 0, unreadable: 0, missing: 0)))

    @Test(arguments: [
        ScrubState(),
        ScrubState(current: ScrubState.Pass(started: 5)),
        ScrubState(last: running.last),
        running,
    ])
    func theTextReadsBackAsWritten(_ state: ScrubState) throws {
        #expect(try ScrubState(decoding: state.encoded) == state)
    }

    @Test func theTextIsTheDocumentedOne() {
        let text = String(decoding: Self.running.encoded, as: UTF8.self)
        let lines = text.split(separator: "\n")
        #expect(lines.count == 4)
        #expect(lines[0] == "cached scrub state 1")
        #expect(lines[1] == "pass 1764000000 0123456789abcdef000000000000002a 7 123456 1 2 3")
        #expect(lines[2] == "last 1763000000 1763000900 15 25000 0 0 0")
        #expect(lines[3].hasPrefix("check ") && lines[3].count == 38)
    }

    /// Anything but what `encoded` wrote is refused, with a reason.
    @Test func aDamagedTextIsRefused() throws {
        let good = Self.running.encoded
        var flipped = good
        flipped[30] ^= 0x01
        let edited = Array(String(decoding: good, as: UTF8.self).replacingOccurrences(of: " 7 ", with: " 8 ").utf8)
        let reordered = Array("cached scrub state 1\nlast 1 2 0 0 0 0 0\npass 1 - 0 0 0 0 0\n".utf8)
        let cases: [([UInt8], String)] = [
            ([], "it is cut short"),
            (Array(good.prefix(good.count - 5)), "it is cut short"),
            (Array(good.dropLast()), "it is cut short"),
            (flipped, "its checksum does not match"),
            (edited, "its checksum does not match"),
            (Array(repeating: UInt8(ascii: "x"), count: 2000), "longer than 1024 bytes"),
            (Self.withCheck(Array("cached scrub state 2\n".utf8)), "it does not begin with \"cached scrub state 1\""),
            (Self.withCheck(Array("cached scrub state 1\npass x - 0 0 0 0 0\n".utf8)), "\"x\" is not a count or a time"),
            (Self.withCheck(Array("cached scrub state 1\npass 1 ABC 0 0 0 0 0\n".utf8)), "\"ABC\" is not an object's hash"),
            (Self.withCheck(reordered), "an unexpected line \"pass 1 - 0 0 0 0 0\""),
            (Self.withCheck(Array("cached scrub state 1\nnext 5\n".utf8)), "an unexpected line \"next 5\""),
        ]
        for (bytes, reason) in cases {
            #expect(throws: ScrubStateDamage(reason), "\(String(decoding: bytes.prefix(40), as: UTF8.self))") {
                try ScrubState(decoding: bytes)
            }
        }
    }

    /// `body` with its check line, as `encoded` ends a text.
    static func withCheck(_ body: [UInt8]) -> [UInt8] {
        body + Array("check \(Hash128(of: body).hex)\n".utf8)
    }

    @Test func theStoreWritesItDurablyAndReadsItBack() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.readScrubState() == .absent)
        try store.writeScrubState(Self.running)
        #expect(store.readScrubState() == .found(Self.running))
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty, "the temp file was renamed into place")
        var st = stat()
        #expect(lstat(dir.path + "/scrub.state", &st) == 0 && st.st_mode & 0o777 == 0o600)
        store.close()
        // A store holding scrub.state is still a store, and keeps it.
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.readScrubState() == .found(Self.running))
    }

    @Test func aDamagedOrStrangeFileIsReportedNotTaken() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let path = dir.path + "/scrub.state"
        var bytes = Self.running.encoded
        bytes[40] ^= 0x20
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(store.readScrubState() == .damaged("\(dir.path)/scrub.state: its checksum does not match"))
        // A link is never followed, to read or to write: the write replaces the link itself.
        try FileSystem.unlink(path)
        let outside = dir.path + "-outside"
        try Data(Self.running.encoded).write(to: URL(fileURLWithPath: outside))
        defer { try? FileManager.default.removeItem(atPath: outside) }
        #expect(symlink(outside, path) == 0)
        #expect(store.readScrubState() == .damaged("\(dir.path)/scrub.state is a symbolic link, not a regular file"))
        try store.writeScrubState(ScrubState())
        #expect(store.readScrubState() == .found(ScrubState()))
        #expect(try FileSystem.read(outside) == Self.running.encoded, "the link's target is untouched")
        // A FIFO is not opened (that would block the scrub).
        try FileSystem.unlink(path)
        #expect(mkfifo(path, 0o600) == 0)
        #expect(store.readScrubState() == .damaged("\(dir.path)/scrub.state is a special file, not a regular file"))
    }

    @Test func objectsComeInHashOrderFromAPosition() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let images: [[UInt8]] = (0..<6).map { Array("GIF89a image \($0)".utf8) }
        try store.replaceManifest(images.indices.map { ("\($0).gif", nil) }, validators: Validators())
        for (row, bytes) in images.enumerated() {
            let w = try store.newObjectWriter(maxSize: 1 << 20)
            try bytes.withUnsafeBytes { try w.append($0) }
            _ = try store.commitObject(w, rows: [(row, "\(row).gif")])
        }
        let sorted = images.map { Hash128(of: $0) }.sorted()
        #expect(store.objectsInHashOrder(after: nil).map(\.hash) == sorted)
        #expect(store.objectsInHashOrder(after: sorted[2]).map(\.hash) == Array(sorted[3...]))
        #expect(store.objectsInHashOrder(after: sorted[5]).isEmpty)
        #expect(store.objectsInHashOrder(after: nil).map(\.size) == sorted.map { h in Int64(images.first { Hash128(of: $0) == h }!.count) })
    }
}
