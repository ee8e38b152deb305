/// "8 MiB", "512 KiB", "17 B": sizes as people read them.
public func formatSize(_ bytes: Int64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
    if unit == 0 { return "\(bytes) B" }
    let rounded = (value * 10).rounded() / 10
    return rounded == rounded.rounded() ? "\(Int(rounded)) \(units[unit])" : "\(NumberText.fixed(rounded, 1)) \(units[unit])"
}
