import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// Variants in a real store: committed durably, found after a restart,
/// refused when the bytes are not the format asked, collected by gc when
/// their source is gone, evicted by last use (docs/storage-format.md).
@Suite struct VariantStoreTests {
    static let fixtures: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<2 { url.deleteLastPathComponent() }
        return url.path + "/Fixtures/images/"
    }()
    static func fixture(_ name: String) throws -> [UInt8] { try FileSystem.read(fixtures + name) }

    static let spec = VariantSpec(width: 40, height: nil, fit: .contain, format: .webp)

    /// A store whose row 0 maps the PNG fixture.
    static func storeWithSource(_ dir: TempDir, maxBytes: Int64 = 0) throws -> (Store, ObjectRef) {
        let store = try Store(StoreConfiguration(directory: dir.path, maxBytes: maxBytes))
        try store.replaceManifest([("a.png", nil)], validators: Validators())
        let w = try store.newObjectWriter(maxSize: 1 << 20)
        try fixture("sample.png").withUnsafeBytes { try w.append($0) }
        return (store, try store.commitObject(w, rows: [(0, "a.png")]))
    }

    @Test func aVariantIsDurableAndFoundAfterARestart() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var (store, source) = try Self.storeWithSource(dir)
        let webp = try Self.fixture("sample.webp")
        let v = try store.commitVariant(webp, of: source.hash, Self.spec, width: 40, height: 40, maxSize: 1 << 20)
        #expect(v.object.hash == Hash128(of: webp) && v.object.type == .webp)
        #expect(store.logFormatVersion == 5, "the log moved to version 5 before the record")
        #expect(try FileSystem.read(store.objectPath(v.object.hash)) == webp)
        #expect(store.stats().variants == 1 && store.stats().objects == 2)
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.variant(of: source.hash, Self.spec) == v)
        let (fd, size) = try store.openVerified(v.object.hash)
        fd.close()
        #expect(size == Int64(webp.count))
    }

    /// The helper's output is taken only when it is an image of the format asked.
    @Test func bytesOfAnotherFormatAreRefusedAndNothingIsKept() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let (store, source) = try Self.storeWithSource(dir)
        defer { store.close() }
        for (bytes, found) in [(try Self.fixture("sample.jpg"), "image/jpeg"), (Array("<html>".utf8), "not an image")] {
            do {
                _ = try store.commitVariant(bytes, of: source.hash, Self.spec, width: 40, height: 40, maxSize: 1 << 20)
                Issue.record("\(found) was taken as webp")
            } catch {
                guard case .notAnImage(let why) = error else { Issue.record("\(error)"); continue }
                #expect(why == "the variant helper's output is \(found), not webp")
            }
        }
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty, "no temp file left")
        #expect(store.variant(of: source.hash, Self.spec) == nil && store.logFormatVersion < 5)
    }

    /// gc removes the variants of an object no row maps, files and all.
    @Test func gcCollectsTheVariantsOfAnUnmappedObject() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let (store, source) = try Self.storeWithSource(dir)
        defer { store.close() }
        let v = try store.commitVariant(try Self.fixture("sample.webp"), of: source.hash, Self.spec, width: 40, height: 40, maxSize: 1 << 20)
        #expect(try store.collectGarbage().removed == 0, "a variant of a mapped object is kept")
        try store.replaceManifest([("b.png", nil)], validators: Validators())
        let (removed, _) = try store.collectGarbage()
        #expect(removed == 2, "the source and its variant")
        #expect(store.variant(of: source.hash, Self.spec) == nil)
        #expect(try FileSystem.status(store.objectPath(v.object.hash)) == nil)
    }

    /// A variant of an object forgotten while it was made is not logged (its file is gc's).
    @Test func aVariantOfAForgottenObjectIsNotLogged() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let (store, source) = try Self.storeWithSource(dir)
        defer { store.close() }
        try store.forgetObject(source.hash)
        let v = try store.commitVariant(try Self.fixture("sample.webp"), of: source.hash, Self.spec, width: 40, height: 40, maxSize: 1 << 20)
        #expect(store.variant(of: source.hash, Self.spec) == nil && store.objectRef(v.object.hash) == nil)
        #expect(try store.collectGarbage().removed == 2, "the forgotten source's file and the variant's")
    }

    /// Variants count in max-size and are evicted by last use like any object.
    @Test func variantsAreEvictedByLastUse() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let png = try Self.fixture("sample.png"), webp = try Self.fixture("sample.webp"), jpeg = try Self.fixture("sample.jpg")
        let (store, source) = try Self.storeWithSource(dir, maxBytes: Int64(png.count + webp.count + jpeg.count - 1))
        defer { store.close() }
        usleep(5_000)
        let first = try store.commitVariant(webp, of: source.hash, Self.spec, width: 40, height: 40, maxSize: 1 << 20)
        usleep(5_000)
        store.touch(source.hash)  // a later use than the first variant's (times are in ms)
        usleep(5_000)
        let jpegSpec = VariantSpec(width: 40, height: nil, fit: .contain, format: .jpeg)
        _ = try store.commitVariant(jpeg, of: source.hash, jpegSpec, width: 40, height: 40, maxSize: 1 << 20)
        #expect(store.variant(of: source.hash, Self.spec) == nil, "the least recently used object went: the first variant")
        #expect(store.objectRef(first.object.hash) == nil)
        #expect(store.variant(of: source.hash, jpegSpec) != nil && store.objectRef(source.hash) != nil)
        #expect(store.stats().evictions == 1)
    }
}

/// variant-max-size: variants alone are weighed against it, the least
/// recently used evicted, originals never.
@Suite struct VariantCapTests {
    @Test func variantsPastTheirCapAreEvictedAndOriginalsStay() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let png = try VariantStoreTests.fixture("sample.png")
        let webp = try VariantStoreTests.fixture("sample.webp"), jpeg = try VariantStoreTests.fixture("sample.jpg")
        var c = StoreConfiguration(directory: dir.path)
        c.maxVariantBytes = Int64(max(webp.count, jpeg.count))
        let store = try Store(c)
        defer { store.close() }
        try store.replaceManifest([("a.png", nil)], validators: Validators())
        let w = try store.newObjectWriter(maxSize: 1 << 20)
        try png.withUnsafeBytes { try w.append($0) }
        let source = try store.commitObject(w, rows: [(0, "a.png")])
        let webpSpec = VariantSpec(width: 40, height: nil, fit: .contain, format: .webp)
        let jpegSpec = VariantSpec(width: 40, height: nil, fit: .contain, format: .jpeg)
        _ = try store.commitVariant(webp, of: source.hash, webpSpec, width: 40, height: 40, maxSize: 1 << 20)
        #expect(store.state.withLock { $0.variantBytes } == Int64(webp.count))
        usleep(5_000)
        _ = try store.commitVariant(jpeg, of: source.hash, jpegSpec, width: 40, height: 40, maxSize: 1 << 20)
        #expect(store.variant(of: source.hash, webpSpec) == nil, "the older variant went")
        #expect(store.variant(of: source.hash, jpegSpec) != nil && store.objectRef(source.hash) != nil, "the newer and the original stay")
        #expect(store.state.withLock { $0.variantBytes } == Int64(jpeg.count))
        #expect(store.stats().evictions == 1)
    }
}
