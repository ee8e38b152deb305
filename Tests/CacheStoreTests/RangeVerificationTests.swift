import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// `Store.openVerifiedRange`: a range is verified by the chunks it lies in;
/// damage there quarantines the object, damage elsewhere is not read.
@Suite struct RangeVerificationTests {
    static let chunk = Int(Store.chunkSize)
    /// Three and a half chunks.
    static let bytes = ChunkFixtures.png(3 * chunk + chunk / 2)

    /// A store holding `bytes` as row 0's image; the store and its object.
    static func stored(_ dir: TempDir) throws -> (Store, ObjectRef) {
        let store = try Store(StoreConfiguration(directory: dir.path))
        try store.replaceManifest([("big.png", nil)], validators: Validators())
        let ref = try store.commitObject(try ChunkFixtures.writer(bytes, store), rows: [(0, "big.png")])
        return (store, ref)
    }

    /// Flips the byte at `offset` of the object's file, keeping its size.
    static func damage(_ store: Store, _ hash: Hash128, at offset: Int) throws {
        let path = store.objectPath(hash)
        _ = chmod(path, 0o600)
        let fd = try FileDescriptor.open(path, .readWrite)
        defer { fd.close() }
        var byte: [UInt8] = [0]
        _ = try byte.withUnsafeMutableBytes { try fd.read(into: $0, at: Int64(offset)) }
        byte[0] ^= 0x55
        _ = pwrite(fd.rawValue, byte, 1, off_t(offset))
    }

    /// The `length` bytes from `offset` through the descriptor handed out.
    static func read(_ fd: FileDescriptor, _ offset: Int, _ length: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        let n = try out.withUnsafeMutableBytes { try Store.readFully(fd, into: $0, at: Int64(offset)) }
        return Array(out.prefix(n))
    }

    static func quarantined(_ dir: TempDir) throws -> [String] { try FileSystem.list(dir.path + "/quarantine") }

    /// Ranges inside one chunk, across each boundary, and the whole of it.
    @Test(arguments: [(0, 1), (chunk - 10, 20), (chunk - 1, chunk + 2), (2 * chunk, chunk), (3 * chunk + 7, chunk / 2 - 7),
                      (0, 3 * chunk + chunk / 2)])
    func aRangeIsServedFromItsVerifiedChunks(_ offset: Int, _ length: Int) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let (store, ref) = try Self.stored(dir)
        defer { store.close() }
        let (fd, size) = try store.openVerifiedRange(ref.hash, offset: Int64(offset), length: Int64(length))
        defer { fd.close() }
        #expect(size == Int64(Self.bytes.count))
        #expect(try Self.read(fd, offset, length) == Array(Self.bytes[offset..<offset + length]))
    }

    /// A damaged chunk the range lies in: corruptObject, the file moved to
    /// quarantine/, the object forgotten and its row uncached.
    @Test(arguments: [(2 * chunk + 5, 0, 3 * chunk), (chunk, chunk - 1, 2), (3 * chunk + 1, 3 * chunk + 100, 1)])
    func aDamagedChunkInsideTheRangeQuarantinesTheObject(_ at: Int, _ offset: Int, _ length: Int) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let (store, ref) = try Self.stored(dir)
        defer { store.close() }
        try Self.damage(store, ref.hash, at: at)
        #expect {
            try store.openVerifiedRange(ref.hash, offset: Int64(offset), length: Int64(length))
        } throws: { error in
            guard case .corruptObject(ref.hash, let to?, [0]) = error as? StoreError else { return false }
            return to.hasPrefix(dir.path + "/quarantine/")
        }
        #expect(try Self.quarantined(dir).count == 1)
        #expect(store.objectRef(ref.hash) == nil && store.row(0)?.object == nil)
        #expect(store.chunkDigests(ref.hash) == nil, "its digests go with it")
    }

    /// A damaged chunk outside the range is not read: the range is served
    /// (those bytes are not sent). A range over it then finds it.
    @Test func aDamagedChunkOutsideTheRangeIsNotRead() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let (store, ref) = try Self.stored(dir)
        defer { store.close() }
        try Self.damage(store, ref.hash, at: 10)
        let (fd, _) = try store.openVerifiedRange(ref.hash, offset: Int64(Self.chunk), length: Int64(2 * Self.chunk))
        #expect(try Self.read(fd, Self.chunk, 2 * Self.chunk) == Array(Self.bytes[Self.chunk..<3 * Self.chunk]))
        fd.close()
        #expect(try Self.quarantined(dir).isEmpty && store.objectRef(ref.hash) != nil)
        #expect(throws: StoreError.self) { try store.openVerifiedRange(ref.hash, offset: 9, length: 2) }
        #expect(try Self.quarantined(dir).count == 1)
    }

    /// A file cut short (or grown) is not the object, whichever chunks are asked.
    @Test(arguments: [Int64(3 * chunk), Int64(4 * chunk)])
    func aFileOfAnotherSizeIsCorrupt(_ newSize: Int64) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let (store, ref) = try Self.stored(dir)
        defer { store.close() }
        #expect(truncate(store.objectPath(ref.hash), off_t(newSize)) == 0)
        #expect(throws: StoreError.self) { try store.openVerifiedRange(ref.hash, offset: 0, length: 1) }
        #expect(try Self.quarantined(dir).count == 1 && store.objectRef(ref.hash) == nil)
    }

    /// A missing file is a missing object, forgotten, as for a whole read.
    @Test func aMissingFileIsAMissingObject() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let (store, ref) = try Self.stored(dir)
        defer { store.close() }
        #expect(unlink(store.objectPath(ref.hash)) == 0)
        #expect {
            try store.openVerifiedRange(ref.hash, offset: 0, length: 1)
        } throws: { error in
            if case .missingObject(ref.hash, [0]) = error as? StoreError { true } else { false }
        }
        #expect(store.objectRef(ref.hash) == nil)
    }
}
