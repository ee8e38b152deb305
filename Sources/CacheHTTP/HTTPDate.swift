#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// HTTP dates (RFC 9110 section 5.6.7). Read as unix seconds: the
/// preferred IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two
/// obsolete forms a recipient must accept, RFC 850 (`Sunday, 06-Nov-94
/// 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`). Written: the
/// `Date` field's value, IMF-fixdate, made at most once a second (a value
/// of this type holds the last one).
public struct HTTPDate: Sendable {
    private var second: Int = -1
    private var value: [UInt8] = []

    public init() {}

    /// The current time as `Tue, 01 Dec 2026 14:49:52 GMT`.
    public mutating func now() -> [UInt8] {
        var t = Glibc.time(nil)
        if Int(t) == second { return value }
        var parts = tm()
        gmtime_r(&t, &parts)
        second = Int(t)
        value = Array(Self.format(parts).utf8)
        return value
    }

    static func format(_ t: tm) -> String {
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(days[Int(t.tm_wday)]), \(two(t.tm_mday)) \(months[Int(t.tm_mon)]) \(t.tm_year + 1900) \(two(t.tm_hour)):\(two(t.tm_min)):\(two(t.tm_sec)) GMT"
    }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// The unix seconds `text` names; nil when it is none of the three
    /// forms, or not a real date and time.
    public static func seconds(_ text: String) -> Int64? {
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" }).map(String.init)
        guard tokens.count >= 5 else { return nil }
        var day: Int?, month: Int?, year: Int?, clock: (Int, Int, Int)?
        for t in tokens.dropFirst() {  // the first is the weekday name
            if let m = months.firstIndex(of: t.lowercased()) { month = m + 1 }
            else if t.contains(":") { clock = time(t) ?? (-1, 0, 0) }
            else if let n = Int(t), t.utf8.allSatisfy(ASCII.isDigit) {
                // In all three forms the day comes before the year.
                if day == nil, t.count <= 2 { day = n }
                else if year == nil, t.count == 2 || t.count == 4 { year = t.count == 2 ? twoDigitYear(n) : n }
                else { return nil }
            } else if t.uppercased() != "GMT" { return nil }
        }
        guard let day, let month, let year, let clock, (1...31).contains(day), year >= 1970,
              (0...23).contains(clock.0), (0...59).contains(clock.1), (0...60).contains(clock.2) else { return nil }
        return days(year: year, month: month, day: day) * 86400 + Int64(clock.0 * 3600 + clock.1 * 60 + clock.2)
    }

    private static func time(_ t: String) -> (Int, Int, Int)? {
        let parts = t.split(separator: ":").compactMap { Int($0) }
        guard parts.count == 3 else { return nil }
        return (parts[0], parts[1], parts[2])
    }

    /// RFC 9110: a two-digit year more than 50 years ahead is in the past century.
    private static func twoDigitYear(_ n: Int) -> Int {
        let thisYear = 1970 + Int(Clock.wallMilliseconds() / 1000 / 31_556_952)
        let candidate = thisYear / 100 * 100 + n
        return candidate > thisYear + 50 ? candidate - 100 : candidate
    }

    /// Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil).
    public static func days(year: Int, month: Int, day: Int) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return Int64(era * 146097 + doe - 719468)
    }
}
