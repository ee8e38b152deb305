#if canImport(Glibc)
import Glibc
#endif
import Testing
import CacheSystem

/// `NumberText.fixed`: C's `%.Nf`, for every fixed decimal the daemon and
/// cachectl print (log lines, the wire's seconds, status lines).
@Suite struct NumberTextTests {
    /// What `snprintf` itself writes, the reference.
    static func c(_ v: Double, _ decimals: Int) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 400) { buffer in
            _ = withVaList([Int32(decimals), v]) { vsnprintf(buffer.baseAddress, buffer.count, "%.*f", $0) }
            return String(cString: buffer.baseAddress!)
        }
    }

    @Test(arguments: [0.0, 1.0, 0.05, 0.125, 0.15, 2.675, 12.3456, 999.95, 1_700_000_000.123456, 86_399.9999])
    func itWritesWhatCWrites(_ v: Double) {
        for decimals in 0...4 { #expect(NumberText.fixed(v, decimals) == Self.c(v, decimals), "\(v) to \(decimals)") }
    }

    @Test func roundingIsOfTheExactBinaryValue() {
        #expect(NumberText.fixed(0.125, 2) == "0.12")  // exactly half: to even
        #expect(NumberText.fixed(0.15, 1) == "0.1")  // 0.1499999...
        #expect(NumberText.fixed(2.5, 0) == "2")
        #expect(NumberText.fixed(1.25, 1) == "1.2")
    }

    @Test func largeAndOddValuesNeitherTrapNorLie() {
        #expect(NumberText.fixed(1e300, 1) == Self.c(1e300, 1))
        // The longest text there is: the buffer holds it whole.
        #expect(NumberText.fixed(-Double.greatestFiniteMagnitude, 20) == Self.c(-Double.greatestFiniteMagnitude, 20))
        #expect(NumberText.fixed(-Double.greatestFiniteMagnitude, 20).count == 331)
        #expect(NumberText.fixed(-1e19, 3) == "-10000000000000000000.000")
        #expect(NumberText.fixed(.nan, 2) == "nan")
        #expect(NumberText.fixed(.infinity, 2) == "inf")
        #expect(NumberText.fixed(-2.5, 1) == "-2.5")
    }

    @Test func aZeroHasNoSign() {
        #expect(NumberText.fixed(-0.04, 1) == "0.0")
        #expect(NumberText.fixed(-0.0, 3) == "0.000")
        #expect(NumberText.fixed(-0.06, 1) == "-0.1")
    }

    @Test func groupedPutsACommaBetweenEveryThreeDigits() {
        #expect(NumberText.grouped(0) == "0")
        #expect(NumberText.grouped(999) == "999")
        #expect(NumberText.grouped(1000) == "1,000")
        #expect(NumberText.grouped(412_000) == "412,000")
        #expect(NumberText.grouped(1_000_000) == "1,000,000")
        #expect(NumberText.grouped(-12_345) == "-12,345")
        #expect(NumberText.grouped(Int.min) == "-9,223,372,036,854,775,808")
    }
}
