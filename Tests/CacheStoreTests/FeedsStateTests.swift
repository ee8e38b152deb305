import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// docs/storage-format.md, "The feeds' state": `feeds.state` written
/// durably, read back, and a damaged one reported (never followed as a link).
@Suite struct FeedsStateTests {
    static let state = FeedsState(entries: [
        .posts: FeedsState.Entry(settings: Hash128(high: 1, low: 2), warning: #"posts page 1 has more: /data/after = "t3_x"; set posts-paging = cursor"#),
        .manifest: FeedsState.Entry(settings: Hash128(high: 3, low: 4)),
    ])

    @Test func theTextIsTheDocumentedOneAndReadsBack() throws {
        let lines = String(decoding: Self.state.encoded, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 5)
        #expect(lines[0] == "cached feeds state 1")
        #expect(lines[1] == "posts 00000000000000010000000000000002")
        #expect(lines[2].hasPrefix("posts-warning posts page 1 has more: "))
        #expect(lines[3] == "manifest 00000000000000030000000000000004")
        #expect(lines[4].hasPrefix("check ") && lines[4].count == 38)
        #expect(try FeedsState(decoding: Self.state.encoded) == Self.state)
        #expect(try FeedsState(decoding: FeedsState().encoded) == FeedsState())
    }

    @Test func aWarningCannotSplitALine() throws {
        let s = FeedsState(entries: [.posts: FeedsState.Entry(settings: Hash128(high: 0, low: 0), warning: "a\nmanifest 0\r\u{7F}b")])
        #expect(try FeedsState(decoding: s.encoded).entries[.posts]?.warning == "a manifest 0  b")
    }

    @Test func aDamagedFileIsRefusedWithAReason() {
        let good = Self.state.encoded
        var flipped = good
        flipped[30] ^= 0x01
        let cases: [[UInt8]] = [Array(good.dropLast()), Array(good.dropLast(10)), flipped, [], Array("cached feeds state 2\n".utf8),
                                Array(repeating: 0x41, count: FeedsState.maxBytes + 1)]
        for bytes in cases {
            #expect(throws: FeedsStateDamage.self) { try FeedsState(decoding: bytes) }
        }
    }

    @Test func theStoreWritesItDurablyAndNeverFollowsALink() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.readFeedsState() == .absent)
        try store.writeFeedsState(Self.state)
        #expect(store.readFeedsState() == .found(Self.state))
        #expect(try FileManager.default.attributesOfItem(atPath: dir.path + "/feeds.state")[.posixPermissions] as? Int == 0o600)
        store.close()
        // A link planted in its place is reported, not followed.
        try FileManager.default.removeItem(atPath: dir.path + "/feeds.state")
        try FileManager.default.createSymbolicLink(atPath: dir.path + "/feeds.state", withDestinationPath: "/etc/passwd")
        let again = try Store(StoreConfiguration(directory: dir.path))
        defer { again.close() }
        guard case .damaged(let why) = again.readFeedsState() else { Issue.record("a link was read"); return }
        #expect(why.contains("not a regular file"))
    }
}
