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
}
