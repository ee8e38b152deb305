import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// The process's heap, as glibc's malloc keeps it.
public enum Memory {
    /// Gives the kernel back the free pages of the heap (`malloc_trim`).
    /// After the temporaries of a large feed are freed the heap is mostly
    /// holes that glibc keeps; a 1,000,000-post refresh left about 1.2 GiB
    /// resident without this. It walks the heap under malloc's lock, so it
    /// is for after rare, large work, not for every request.
    public static func returnFreePages() {
        _ = clinux_release_free_memory()
    }

    /// Bodies at least this large are worth a `returnFreePages` once handled.
    public static let largeBody = 8 << 20

    /// Gives the kernel back the whole pages of `bytes` from `start` to
    /// `end`: they read as zeros from then on. For a buffer its owner is
    /// reading through once and will not read behind itself again (a feed
    /// document whose posts are copied out: issue 34); only whole pages
    /// inside the buffer are touched, never the allocator's header before it
    /// or what follows it. Returns where the given-back bytes end (at most
    /// `end`; `start` when no whole page lies between), to pass as the next
    /// call's `start`; a failure of `madvise` only leaves the pages resident.
    @discardableResult
    public static func discard(_ bytes: UnsafeMutableRawBufferPointer, from start: Int = 0, before end: Int) -> Int {
        guard let base = bytes.baseAddress, start >= 0, end > start else { return max(start, 0) }
        let page = UInt(pageSize)
        let address = UInt(bitPattern: base)
        let first = (address + UInt(min(start, bytes.count)) + page - 1) / page * page
        let last = (address + UInt(min(end, bytes.count))) / page * page
        guard last > first, let from = UnsafeMutableRawPointer(bitPattern: first) else { return start }
        _ = madvise(from, Int(last - first), MADV_DONTNEED)
        return Int(last - address)
    }

    /// Gives the kernel back the whole pages of `array`'s capacity past its
    /// elements (reserved, never written, or faulted in ahead: an array a
    /// `Prefaulter` made, partly filled); they are faulted afresh, as zeros,
    /// if the array grows into them. Room past the elements holds no value,
    /// whatever the element type.
    public static func discardUnused<Element>(_ array: inout [Element]) {
        // Unique first (a shared buffer is copied, as any change would), and
        // only then its capacity read: the room given back must be this
        // buffer's, never another's capacity over a smaller copy.
        array.withUnsafeMutableBufferPointer { _ in }
        let (count, capacity) = (array.count, array.capacity)
        guard capacity > count else { return }
        let stride = MemoryLayout<Element>.stride
        array.withUnsafeMutableBufferPointer { elements in
            guard let base = elements.baseAddress else { return }
            discard(UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(base), count: capacity * stride),
                    from: count * stride, before: capacity * stride)
        }
    }

    /// Faults in the pages of `bytes` by writing a zero into each: for
    /// memory nothing else reads yet (an array's room before its elements).
    public static func touchPages(_ bytes: UnsafeMutableRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        let first = (pageSize - Int(UInt(bitPattern: base) % UInt(pageSize))) % pageSize
        for offset in stride(from: first, to: bytes.count, by: pageSize) {
            bytes.storeBytes(of: 0, toByteOffset: offset, as: UInt8.self)
        }
    }

    /// The size of a page of memory.
    public static let pageSize = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)
}
