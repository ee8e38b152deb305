#if canImport(Glibc)
import Glibc
#endif
import Testing
import CacheSystem

/// `Prefaulter`: an array asked for is made on its thread with its pages
/// resident, handed over once and not shared; a take finds only what was
/// made for its key; `stop` asks for nothing more.
@Suite struct PrefaulterTests {
    /// How many of the pages of `bytes` (whole pages inside it) are resident (`mincore`).
    static func residentPages(_ bytes: UnsafeRawBufferPointer) -> (resident: Int, pages: Int) {
        let page = UInt(Memory.pageSize)
        let address = UInt(bitPattern: bytes.baseAddress!)
        let first = (address + page - 1) / page * page
        let last = (address + UInt(bytes.count)) / page * page
        let pages = Int((last - first) / page)
        var vector = [UInt8](repeating: 0, count: pages)
        let rc = mincore(UnsafeMutableRawPointer(bitPattern: first), Int(last - first), &vector)
        #expect(rc == 0, "mincore: errno \(errno)")
        return (vector.filter { $0 & 1 == 1 }.count, pages)
    }

    @Test func anEmptyArrayIsMadeWithItsPagesResidentAndHandedOverOnce() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        let capacity = 4 << 20
        let key = Prefaulter.Key(UInt8.self, purpose: 1, capacity: capacity)
        p.prepare(key, filledWith: UInt8?.none)
        p.waitUntilMade()
        var array = try #require(p.take(key, as: UInt8.self))
        #expect(p.take(key, as: UInt8.self) == nil, "handed over once")
        #expect(p.taken == 1)
        #expect(array.isEmpty && array.capacity >= capacity)
        let base = array.withUnsafeBufferPointer { $0.baseAddress }
        let (resident, pages) = array.withUnsafeBufferPointer { Self.residentPages(UnsafeRawBufferPointer(start: $0.baseAddress, count: capacity)) }
        #expect(resident == pages && pages > 1000, "\(resident) of \(pages) pages resident")
        // Not shared: filling it to its capacity writes in place.
        array.append(contentsOf: repeatElement(7, count: capacity))
        #expect(array.withUnsafeBufferPointer { $0.baseAddress } == base, "the array was copied: it was still shared")
    }

    @Test func aFilledArrayHoldsItsValueInEveryPlace() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        let key = Prefaulter.Key(UInt64.self, purpose: 3, capacity: 100_000)
        p.prepare(key, filledWith: UInt64.max)
        p.waitUntilMade()
        let array = try #require(p.take(key, as: UInt64.self))
        #expect(array.count == 100_000 && array.allSatisfy { $0 == .max })
    }

    @Test func aTakeFindsOnlyWhatWasMadeForItsKey() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        let key = Prefaulter.Key(UInt8.self, purpose: 1, capacity: 8192)
        #expect(p.take(key, as: UInt8.self) == nil, "nothing asked for")
        p.prepare(key, filledWith: UInt8?.none)
        p.waitUntilMade()
        #expect(p.take(Prefaulter.Key(UInt8.self, purpose: 1, capacity: 16384), as: UInt8.self) == nil, "another size")
        #expect(p.take(Prefaulter.Key(UInt8.self, purpose: 2, capacity: 8192), as: UInt8.self) == nil, "another purpose")
        #expect(p.take(Prefaulter.Key(Int8.self, purpose: 1, capacity: 8192), as: Int8.self) == nil, "another type")
        #expect(p.take(key, as: UInt8.self) != nil)
    }

    @Test func afterStopNothingIsMadeOrWaits() throws {
        let p = try #require(Prefaulter())
        let made = Prefaulter.Key(UInt8.self, purpose: 1, capacity: 8192)
        p.prepare(made, filledWith: UInt8?.none)
        p.waitUntilMade()
        p.stop()
        #expect(p.take(made, as: UInt8.self) == nil, "what was not taken is freed at stop")
        let later = Prefaulter.Key(UInt8.self, purpose: 2, capacity: 8192)
        p.prepare(later, filledWith: UInt8?.none)
        p.waitUntilMade()
        #expect(p.take(later, as: UInt8.self) == nil && p.taken == 0)
    }

    @Test func theCurrentPrefaulterIsTheReplayingThreadsOnly() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        #expect(Prefaulter.current == nil)
        Prefaulter.$current.withValue(p) {
            #expect(Prefaulter.current === p)
            let seen = Monitor<Bool?>(nil)
            #expect(throws: Never.self) { try Threads.start(name: "test-other") { seen.update { $0 = Prefaulter.current != nil } } }
            #expect(seen.wait { $0 } == false, "another thread found the replay's prefaulter")
        }
        #expect(Prefaulter.current == nil)
    }
}
