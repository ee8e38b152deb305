#if canImport(Glibc)
import Glibc
#endif

/// Which pages of a buffer the process has in memory, as `mincore(2)` says:
/// for tests of memory made ahead (`Prefaulter`) or given back
/// (`Memory.discardUnused`).
public enum ResidentPages {
    /// How many of the whole pages inside `bytes` are resident, and how
    /// many whole pages there are; nil when `mincore` fails.
    public static func count(_ bytes: UnsafeRawBufferPointer) -> (resident: Int, pages: Int)? {
        guard let base = bytes.baseAddress else { return (0, 0) }
        let page = UInt(max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096))
        let address = UInt(bitPattern: base)
        let first = (address + page - 1) / page * page
        let last = (address + UInt(bytes.count)) / page * page
        guard last > first else { return (0, 0) }
        let pages = Int((last - first) / page)
        var vector = [UInt8](repeating: 0, count: pages)
        guard mincore(UnsafeMutableRawPointer(bitPattern: first), Int(last - first), &vector) == 0 else { return nil }
        return (vector.filter { $0 & 1 == 1 }.count, pages)
    }
}
