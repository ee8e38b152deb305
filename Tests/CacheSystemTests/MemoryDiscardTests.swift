import Testing
import CacheSystem

/// `Memory.discard`: whole pages inside the buffer and before the end go
/// back to the kernel (they read as zeros); nothing else is touched.
@Suite struct MemoryDiscardTests {
    @Test func onlyWholePagesBeforeTheEndAreGivenBack() {
        let page = Memory.pageSize
        let whole = UnsafeMutableRawBufferPointer.allocate(byteCount: 40 * page, alignment: page)
        defer { whole.deallocate() }
        // A buffer starting 100 bytes into a page: its first partial page is kept.
        let bytes = UnsafeMutableRawBufferPointer(rebasing: whole[100..<(30 * page)])
        bytes.initializeMemory(as: UInt8.self, repeating: 0xAB)
        let end = 10 * page + 7
        let given = Memory.discard(bytes, before: end)
        // From the buffer's start, the given-back bytes end at the last page boundary before `end`.
        #expect(given == 10 * page - 100)
        #expect(bytes[0..<(page - 100)].allSatisfy { $0 == 0xAB }, "the partial first page was kept")
        #expect(bytes[(page - 100)..<given].allSatisfy { $0 == 0 }, "the whole pages read as zeros")
        #expect(bytes[given...].allSatisfy { $0 == 0xAB }, "nothing at or after the end's page was touched")
        #expect(Memory.discard(bytes, before: page - 200) == 0, "no whole page: nothing given back")
        #expect(Memory.discard(bytes, before: 0) == 0)
        // On from where the last call ended: the next whole pages only.
        let next = Memory.discard(bytes, from: given, before: 14 * page)
        #expect(next == 14 * page - 100)
        #expect(bytes[given..<next].allSatisfy { $0 == 0 } && bytes[next...].allSatisfy { $0 == 0xAB })
        #expect(Memory.discard(bytes, from: next, before: next + 10) == next, "less than a page: nothing, and where it stands")
    }

    @Test func anEndPastTheBufferStopsAtItsLastWholePage() {
        let page = Memory.pageSize
        let whole = UnsafeMutableRawBufferPointer.allocate(byteCount: 8 * page, alignment: page)
        defer { whole.deallocate() }
        let bytes = UnsafeMutableRawBufferPointer(rebasing: whole[0..<(5 * page + 10)])
        whole.initializeMemory(as: UInt8.self, repeating: 0xCD)
        #expect(Memory.discard(bytes, before: 100 * page) == 5 * page)
        #expect(whole[(5 * page)...].allSatisfy { $0 == 0xCD })
    }

    /// An array's room past its elements goes back (reads as zeros), its
    /// elements stay; an array without room is left as it is.
    @Test func anArraysRoomPastItsElementsIsGivenBack() {
        let page = Memory.pageSize
        let capacity = 64 * page / 8
        var array = [Int64](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            // The whole room written (as a Prefaulter's touch does), the first 1,000 made elements.
            UnsafeMutableRawBufferPointer(buffer).initializeMemory(as: UInt8.self, repeating: 0x5A)
            for i in 0..<1000 { buffer[i] = Int64(i) }
            initialized = 1000
        }
        Memory.discardUnused(&array)
        #expect(array.count == 1000 && array.elementsEqual(0..<1000))
        array.withUnsafeBufferPointer { b in
            let room = UnsafeRawBufferPointer(start: b.baseAddress, count: capacity * 8)
            let (base, size) = (UInt(bitPattern: b.baseAddress!), UInt(page))
            let firstWhole = Int((base + 8000 + size - 1) / size * size - base)
            let lastWhole = Int((base + UInt(capacity * 8)) / size * size - base)
            #expect(lastWhole - firstWhole >= 60 * page)
            #expect(room[8000..<firstWhole].allSatisfy { $0 == 0x5A }, "the page the elements end in is kept")
            #expect(room[firstWhole..<lastWhole].allSatisfy { $0 == 0 }, "the room's whole pages read as zeros")
        }
        var full = [UInt8](repeating: 1, count: 3 * page)
        Memory.discardUnused(&full)
        #expect(full.allSatisfy { $0 == 1 })
    }

    /// A shared array is made unique first (copied, as any change would
    /// copy it), and only the copy's own room is given back: the other
    /// holder's elements and the heap around the copy are untouched (the
    /// review found the old capacity applied to the new, smaller copy,
    /// zeroing the blocks after it).
    @Test func aSharedArraysCopyGivesBackOnlyItsOwnRoom() {
        let page = Memory.pageSize
        let pattern: Int64 = 0x0ABC_DEF0_1234_5678
        // Blocks the size of the copy, and a hole among them for it to land in.
        var neighbours: [[Int64]] = (0..<400).map { _ in [Int64](repeating: pattern, count: 1000) }
        neighbours[200] = []
        var array = [Int64]()
        array.reserveCapacity(64 * page / 8)
        array.append(contentsOf: 0..<1000)
        let other = array
        Memory.discardUnused(&array)
        #expect(other.elementsEqual(0..<1000) && array.elementsEqual(0..<1000))
        let damaged = neighbours.indices.filter { !neighbours[$0].isEmpty && !neighbours[$0].allSatisfy { $0 == pattern } }
        #expect(damaged.isEmpty, "\(damaged.count) blocks near the copy were zeroed")
    }
}
