import Foundation
@testable import CacheStore
import CacheSystem

/// A version-1 log, its bytes built here by hand from docs/storage-format.md
/// (not by `RecordCodec`): what a cached of format version 1 wrote.
enum VersionOneLog {
    static let header: [UInt8] = Array("CACHEDL".utf8) + [1]

    static func uvarint(_ v: UInt64) -> [UInt8] {
        var v = v, out: [UInt8] = []
        while v >= 0x80 { out.append(UInt8(v & 0x7F) | 0x80); v >>= 7 }
        return out + [UInt8(v)]
    }
    static func svarint(_ v: Int64) -> [UInt8] { uvarint(UInt64(bitPattern: (v << 1) ^ (v >> 63))) }
    static func bytes(_ s: String) -> [UInt8] { uvarint(UInt64(s.utf8.count)) + Array(s.utf8) }
    static func ostring(_ s: String?) -> [UInt8] { s.map { [1] + bytes($0) } ?? [0] }

    static func post(_ id: Int64, _ json: String) -> [UInt8] { frame([1] + svarint(id) + bytes(json)) }
    static func postRemoved(_ id: Int64) -> [UInt8] { frame([2] + svarint(id)) }
    static func manifestSize(_ n: Int) -> [UInt8] { frame([3] + uvarint(UInt64(n))) }
    static func row(_ i: Int, _ url: String, _ description: String?) -> [UInt8] {
        frame([4] + uvarint(UInt64(i)) + bytes(url) + ostring(description))
    }
    static func validators(_ feed: UInt8, _ etag: String?, _ lastModified: String?) -> [UInt8] {
        frame([7, feed] + ostring(etag) + ostring(lastModified))
    }
    static let commit = frame([0x7F])

    static let postsETag = "\"v1\""
    static let postsLastModified = "Mon, 30 Nov 2026 11:54:36 GMT"
    static let manifestLastModified = "Tue, 01 Dec 2026 06:00:00 GMT"

    /// Posts 3, 1, 2 (and 9, removed again) with the posts feed's
    /// validators; a manifest of two rows with its own.
    static func sample() -> [UInt8] {
        header
            + post(3, #"{"id":3}"#) + post(1, #"{"id":1}"#) + post(9, #"{"id":9}"#) + post(2, #"{"id":2}"#)
            + validators(1, postsETag, postsLastModified) + commit
            + postRemoved(9) + validators(1, postsETag, postsLastModified) + commit
            + manifestSize(2) + row(0, "a.png", "A") + row(1, "b.png", nil) + validators(2, nil, manifestLastModified) + commit
    }

    static func json(_ id: Int64) -> [UInt8] { Array("{\"id\":\(id)}".utf8) }

    /// A store directory holding only `sample()` as its log.
    static func makeStore(_ dir: TempDir) throws -> [UInt8] {
        let bytes = sample()
        try Data(bytes).write(to: URL(fileURLWithPath: dir.path + "/index.log"))
        return bytes
    }
}
