#if canImport(Glibc)
import Glibc
#endif
import Testing
import CacheSystem

/// `formatSize`, the one size formatter, against the two it replaces
/// (copied below as they were): the daemon's (`formatSize`, a tenth only
/// when needed) and cachectl's (`Format.size`, always a tenth, C's `%.1f`).
@Suite struct FormatSizeTests {
    /// CacheSystem's `formatSize`, as it was.
    static func daemonSize(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        if unit == 0 { return "\(bytes) B" }
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? "\(Int(rounded)) \(units[unit])" : "\(NumberText.fixed(rounded, 1)) \(units[unit])"
    }

    /// cachectl's `Format.size`, as it was.
    static func cachectlSize(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var v = Double(bytes)
        var u = 0
        while v >= 1024 && u < units.count - 1 { v /= 1024; u += 1 }
        guard u > 0 else { return "\(bytes) B" }
        let text = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 350) { buffer in
            _ = withVaList([v]) { vsnprintf(buffer.baseAddress, buffer.count, "%.1f", $0) }
            return String(cString: buffer.baseAddress!)
        }
        return text + " " + units[u]
    }

    /// What tests and docs pin.
    @Test func theOutputsThatArePinned() {
        #expect(formatSize(10) == "10 B")
        #expect(formatSize(3 << 10) == "3 KiB")
        #expect(formatSize(768 << 10) == "768 KiB")
        #expect(formatSize(1 << 20) == "1 MiB")
        #expect(formatSize(8 << 20) == "8 MiB")
        #expect(formatSize(64 << 20) == "64 MiB")
        #expect(formatSize(1 << 30) == "1 GiB")
        #expect(formatSize(16 << 10, decimals: .always) == "16.0 KiB")  // docs/operations.md, cachectl status
        #expect(formatSize(24_474, decimals: .always) == "23.9 KiB")
        #expect(formatSize(1023, decimals: .always) == "1023 B")
        #expect(formatSize(0) == "0 B")
        #expect(formatSize(-5) == "-5 B")
        #expect(formatSize(1 << 50) == "1024 TiB")
        #expect(formatSize(Int64.max) == "8388608 TiB")
    }

    /// The same text as each old formatter for every size that is not a
    /// tie (a size whose tenths end exactly in 5: a quarter or three
    /// quarters of a unit), where cachectl's `%.1f` rounded to even and
    /// the daemon's, like this one, rounds half up.
    @Test func theSameAsBothOldFormattersButOnTies() {
        var sizes: [Int64] = Array(0...5000) + [1_048_575, 1_048_576, 1_048_577, 1_073_741_823, 5_000_000_000, 1 << 40, (1 << 40) + 1]
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<20_000 {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            sizes.append(Int64(x >> (UInt64(x % 40) + 20)))
        }
        var daemonDiffer: [Int64] = [], cachectlDiffer: [Int64] = []
        for s in sizes {
            if formatSize(s) != Self.daemonSize(s) { daemonDiffer.append(s) }
            let unit = Int64(1) << (10 * max(0, min(4, (63 - s.leadingZeroBitCount) / 10)))
            let tie = s >= 1024 && (s % unit) * 10 % unit == unit / 2
            if !tie && formatSize(s, decimals: .always) != Self.cachectlSize(s) { cachectlDiffer.append(s) }
        }
        #expect(daemonDiffer.isEmpty, "\(daemonDiffer.prefix(10))")
        #expect(cachectlDiffer.isEmpty, "\(cachectlDiffer.prefix(10))")
    }

    /// On a tie both styles round half up now: cachectl's `%.1f` said 1.2.
    @Test func aTieRoundsHalfUp() {
        #expect(formatSize(1280) == "1.3 KiB")
        #expect(formatSize(1280, decimals: .always) == "1.3 KiB")
        #expect(Self.daemonSize(1280) == "1.3 KiB")
        #expect(Self.cachectlSize(1280) == "1.2 KiB")
        #expect(formatSize(1792, decimals: .always) == "1.8 KiB")
    }
}
