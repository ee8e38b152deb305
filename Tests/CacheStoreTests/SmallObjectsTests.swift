import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// Small objects kept in memory once read (`SmallObjects`): bounded, served
/// without touching the file again, dropped with the object.
@Suite struct SmallObjectsTests {
    @Test func theTotalStaysUnderItsCapacityOldestFirst() {
        var kept = SmallObjects()
        let body = [UInt8](repeating: 1, count: SmallObjects.maxObjectSize)
        var hashes: [Hash128] = []
        for i in 0..<(SmallObjects.capacity / body.count + 10) {
            var b = body
            b[0] = UInt8(i & 0xFF)
            b[1] = UInt8(i >> 8)
            let h = b.withUnsafeBytes { Hash128(of: $0) }
            hashes.append(h)
            kept.put(h, b)
            #expect(kept.total <= SmallObjects.capacity)
        }
        #expect(kept.get(hashes[0]) == nil, "the oldest went first")
        #expect(kept.get(hashes.last!) != nil)
        kept.put(Hash128(of: UnsafeRawBufferPointer(start: nil, count: 0)), [UInt8](repeating: 0, count: SmallObjects.maxObjectSize + 1))
        #expect(kept.count == SmallObjects.capacity / body.count, "an object over the limit is not kept")
    }

    /// Once read, a small object is served from memory: its file changed
    /// through the file system afterwards is not read (the bytes served
    /// stay the object's); forgotten by the index, it is gone from memory.
    @Test func aReadObjectIsServedFromMemoryUntilTheIndexForgetsIt() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try Store(StoreConfiguration(directory: dir.path)); defer { s.close() }
        try s.replaceManifest([("a.png", nil)], validators: Validators())
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 3, count: 1000)
        let w = try s.newObjectWriter(maxSize: 1 << 20)
        try png.withUnsafeBytes { try w.append($0) }
        let ref = try s.commitObject(w, rows: [(0, "a.png")])
        let first = try #require(s.readVerifiedIfCached(ref.hash, upTo: 1 << 20) { _ in [] })
        #expect(first == png)
        // Damaged on disk: the bytes in memory are the object's, and are served.
        let fd = try FileDescriptor.open(s.objectPath(ref.hash), .writeOnly)
        try fd.writeAll([0])
        fd.close()
        #expect(s.readVerifiedIfCached(ref.hash, upTo: 1 << 20) { _ in [] } == png)
        try s.forgetObject(ref.hash)
        #expect(s.smallObjects.withLock { $0.get(ref.hash) } == nil)
        #expect(s.readVerifiedIfCached(ref.hash, upTo: 1 << 20) { _ in [] } == nil)
    }
}
