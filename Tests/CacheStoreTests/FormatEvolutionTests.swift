import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// A record frame around `payload` with a correct checksum: what a newer
/// cached would write for a record this version does not know.
func frame(_ payload: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    out.putUInt32LE(UInt32(payload.count))
    out.putUInt32LE(payload.withUnsafeBytes { recordChecksum($0) })
    return out + payload
}

/// docs/storage-format.md, "Format evolution": what passes its checksum but is
/// not known to this version was written by a newer cached. The log is then
/// refused and left byte for byte as it was; damage is still cut aside.
@Suite struct FormatEvolutionTests {
    /// A store directory whose log holds two committed transactions
    /// (posts 1 and 2), made by this version; returns the log's path.
    static func makeStore(_ dir: TempDir) throws -> String {
        let store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts([(1, Array("{\"id\":1}".utf8))], validators: Validators())
        _ = try store.replacePosts([(1, Array("{\"id\":1}".utf8)), (2, Array("{\"id\":2}".utf8))], validators: Validators())
        store.close()
        return dir.path + "/index.log"
    }

    static func append(_ bytes: [UInt8], to log: String) throws {
        let fd = try FileDescriptor.open(log, [.writeOnly, .append])
        defer { fd.close() }
        try fd.writeAll(bytes)
    }

    static func overwrite(_ log: String, _ bytes: [UInt8]) throws {
        let fd = try FileDescriptor.open(log, [.writeOnly, .truncate])
        defer { fd.close() }
        try fd.writeAll(bytes)
    }

    static func savedAside(_ dir: TempDir) throws -> [String] {
        try FileSystem.list(dir.path).filter { $0.hasPrefix("index.log.corrupt-") }
    }

    /// Opens the log the way the store does; returns the error, or nil when it opened.
    static func openLog(_ dir: TempDir) throws -> IndexLogError? {
        let files = try ConfinedDirectory(opening: dir.path)
        defer { files.close() }
        do throws(IndexLogError) {
            let log = try IndexLog(directory: files, name: "index.log") { _ in }
            log.close()
            return nil
        } catch {
            return error
        }
    }

    /// Opening must fail with the newer-store refusal and change nothing:
    /// the log keeps every byte, nothing is saved aside. Returns what was found.
    static func expectRefusedUntouched(_ dir: TempDir, _ log: String,
                                       sourceLocation: SourceLocation = #_sourceLocation) throws -> String? {
        let before = try FileSystem.read(log)
        let listing = try FileSystem.list(dir.path).sorted()
        let error = try openLog(dir)
        #expect(error != nil, "the log must not open", sourceLocation: sourceLocation)
        #expect(try FileSystem.read(log) == before, "the log's bytes must not change", sourceLocation: sourceLocation)
        #expect(try savedAside(dir).isEmpty, "nothing may be cut aside", sourceLocation: sourceLocation)
        #expect(try FileSystem.list(dir.path).sorted() == listing, sourceLocation: sourceLocation)
        guard let error else { return nil }
        guard case .writtenByNewerVersion(let found) = StoreError(opening: error) else {
            Issue.record("not the newer-store refusal: \(error)", sourceLocation: sourceLocation)
            return nil
        }
        return found
    }

    @Test func aHeaderNamingANewerVersionIsRefusedAndLeftAlone() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        var bytes = try FileSystem.read(log)
        bytes[7] = 6
        try Self.overwrite(log, bytes)
        #expect(try Self.expectRefusedUntouched(dir, log) == "index.log format version 6, this daemon reads version 5")
        // Any later version too, and a header alone (a newer daemon's fresh store).
        try Self.overwrite(log, RecordCodec.magic + [0xFF])
        #expect(try Self.expectRefusedUntouched(dir, log) == "index.log format version 255, this daemon reads version 5")
    }

    @Test func aRecordOfAnUnknownTypeIsRefusedAndLeftAlone() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        let offset = try FileSystem.read(log).count
        try Self.append(frame([0x17, 1, 2, 3]) + RecordCodec.encode(.commit), to: log)
        #expect(try Self.expectRefusedUntouched(dir, log) == "unknown record type 0x17 at offset \(offset) of index.log")
    }

    @Test func anUnknownImageTypeIsRefusedAndLeftAlone() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        var payload = Array(RecordCodec.encode(.rowObject(row: 0, hash: Hash128(of: [1]), size: 9, type: .jxl))[8...])
        payload[payload.count - 1] = 16
        let offset = try FileSystem.read(log).count
        try Self.append(frame(payload) + RecordCodec.encode(.commit), to: log)
        #expect(try Self.expectRefusedUntouched(dir, log)
                == "unknown image type 16 in a rowObject (type 0x05) record at offset \(offset) of index.log")
    }

    @Test func anUnknownFeedIsRefusedAndLeftAlone() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        var payload = Array(RecordCodec.encode(.validators(feed: .posts, etag: nil, lastModified: nil))[8...])
        payload[1] = 3
        try Self.append(frame(payload) + RecordCodec.encode(.commit), to: log)
        #expect(try Self.expectRefusedUntouched(dir, log)?.hasPrefix("unknown feed 3 in a validators (type 0x07) record at offset ") == true)
    }

    @Test func aFieldAppendedToAKnownRecordIsRefusedAndLeftAlone() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        let payload = Array(RecordCodec.encode(.postRemoved(id: .int(1)))[8...]) + [0x2A]
        try Self.append(frame(payload) + RecordCodec.encode(.commit), to: log)
        #expect(try Self.expectRefusedUntouched(dir, log)?
                    .hasPrefix("1 bytes after the last known field of a postRemoved (type 0x02) record at offset ") == true)
    }

    @Test func anUnknownOptionalStringFlagIsRefusedAndLeftAlone() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        var payload = Array(RecordCodec.encode(.row(row: 0, url: "a.png", description: nil))[8...])
        payload[payload.count - 1] = 2
        try Self.append(frame(payload) + RecordCodec.encode(.commit), to: log)
        #expect(try Self.expectRefusedUntouched(dir, log)?.hasPrefix("unknown optional-string flag 2 at offset ") == true)
    }

    @Test func anUnknownRecordInAnUnfinishedTransactionIsRefusedToo() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        try Self.append(RecordCodec.encode(.postRemoved(id: .int(2))) + frame([0x17]), to: log)
        #expect(try Self.expectRefusedUntouched(dir, log)?.hasPrefix("unknown record type 0x17 at offset ") == true)
    }

    /// What the daemon prints at start (`cannot open the store: ...`) comes
    /// from the store's error; the store is refused and the log untouched.
    @Test func theStoreRefusesANewerLogAndSaysWhatToDo() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        var bytes = try FileSystem.read(log)
        bytes[7] = 6
        try Self.overwrite(log, bytes)
        let posts = try FileSystem.list(dir.path + "/posts").sorted()
        do {
            let store = try Store(StoreConfiguration(directory: dir.path))
            store.close()
            Issue.record("a store written by a newer cached must not open")
        } catch {
            #expect("\(error)" == "store written by a newer cached: index.log format version 6, this daemon reads version 5; "
                + "nothing was cut or rewritten: run that newer cached (or a later one) on it, or point this one at another --store")
            guard case .writtenByNewerVersion("index.log format version 6, this daemon reads version 5") = error else {
                Issue.record("not mapped to writtenByNewerVersion: \(error)"); return
            }
        }
        #expect(try FileSystem.read(log) == bytes)
        #expect(try Self.savedAside(dir).isEmpty)
        #expect(try FileSystem.list(dir.path + "/posts").sorted() == posts)
        // And the refusal holds the next time too: nothing was "repaired".
        #expect(throws: StoreError.self) { try Store(StoreConfiguration(directory: dir.path)) }
        #expect(try FileSystem.read(log) == bytes)
    }

    // Damage is cut aside as before, whatever the record's type.

    @Test func anUnknownTypeWithABadChecksumIsDamageAndCut() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        let good = try FileSystem.read(log)
        var bad = frame([0x17, 1, 2, 3])
        bad[4] ^= 0x01
        try Self.append(bad + RecordCodec.encode(.commit), to: log)
        #expect(try Self.openLog(dir) == nil)
        #expect(try FileSystem.read(log) == good)
        #expect(try Self.savedAside(dir).count == 1)
    }

    @Test func anUnknownRecordAfterDamageIsCutWithTheDamage() throws {
        // Why new record types need a new format version: behind damage, the
        // replay cannot see them, and they go aside with the damaged tail.
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        let good = try FileSystem.read(log)
        var torn = RecordCodec.encode(.postRemoved(id: .int(1)))
        torn[9] ^= 0x01
        try Self.append(torn + frame([0x17]) + RecordCodec.encode(.commit), to: log)
        #expect(try Self.openLog(dir) == nil)
        #expect(try FileSystem.read(log) == good)
        #expect(try Self.savedAside(dir).count == 1)
    }

    /// A header that is not ours: damage, not a newer cached.
    enum HeaderDamage: CaseIterable, Sendable {
        case otherMagic, versionZero, cutShort, magicOnly

        func apply(_ b: inout [UInt8]) {
            switch self {
            case .otherMagic: b[0] = UInt8(ascii: "X")
            case .versionZero: b[7] = 0
            case .cutShort: b = Array(b[0..<5])
            case .magicOnly: b = Array(b[0..<7])
            }
        }
    }

    /// Not our magic, version 0 (never written), a header cut short: the
    /// whole log is set aside, as before.
    @Test(arguments: HeaderDamage.allCases)
    func aHeaderThatIsNotOursIsDamageAndSetAsideWhole(_ damage: HeaderDamage) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try Self.makeStore(dir)
        var bytes = try FileSystem.read(log)
        damage.apply(&bytes)
        try Self.overwrite(log, bytes)
        #expect(try Self.openLog(dir) == nil)
        #expect(try FileSystem.read(log) == RecordCodec.header(version: 1))
        let saved = try Self.savedAside(dir)
        #expect(saved.count == 1)
        #expect(try saved.map { try FileSystem.read(dir.path + "/" + $0) } == [bytes])
    }
}
