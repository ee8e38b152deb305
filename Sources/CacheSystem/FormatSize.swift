/// How many decimals `formatSize` writes.
public enum SizeDecimals: Sendable {
    /// A tenth only when it is not 0: "8 MiB", "1.5 KiB" (messages and logs).
    case whenNeeded
    /// Always a tenth: "8.0 MiB", "1.5 KiB" (cachectl, whose sizes line up in columns).
    case always
}

/// "8 MiB", "512 KiB", "1.5 GiB", "17 B": sizes as people read them, the
/// one formatter of sizes. The unit is the largest of B, KiB, MiB, GiB and
/// TiB that the size reaches (1024 each); the number is rounded to a tenth,
/// half up, exactly (from the integer, no floating point); bytes are whole
/// ("17 B" in either style, as is any size under 1 KiB).
public func formatSize(_ bytes: Int64, decimals: SizeDecimals = .whenNeeded) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var unit = 0
    while unit < units.count - 1 && bytes >> (10 * (unit + 1)) > 0 { unit += 1 }
    if unit == 0 { return "\(bytes) B" }
    let divisor = Int64(1) << (10 * unit)
    let scaled = (bytes % divisor) * 10
    var tenths = bytes / divisor * 10 + scaled / divisor
    if (scaled % divisor) * 2 >= divisor { tenths += 1 }
    if decimals == .whenNeeded && tenths % 10 == 0 { return "\(tenths / 10) \(units[unit])" }
    return "\(tenths / 10).\(tenths % 10) \(units[unit])"
}
