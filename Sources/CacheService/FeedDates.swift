import CacheHTTP
import CacheSystem

/// The dates of RSS and Atom entries as RFC 3339 text in UTC
/// (`2003-06-10T04:00:00Z`), the form JSON Feed 1.1 asks for: RSS's RFC 822
/// dates as feeds write them, and W3CDTF / ISO 8601 (Atom, `dc:date`).
/// No Foundation: the arithmetic is days-from-civil and its inverse.
enum FeedDates {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    /// RFC 822's named zones (section 5.1), in minutes east of UTC, and
    /// the abbreviations feeds write that name one zone only (`CET`,
    /// `JST`, `AEST`...; not `BST` or `IST`, each of which names two or three).
    private static let zones: [String: Int] = [
        "GMT": 0, "UT": 0, "UTC": 0, "Z": 0,
        "EST": -300, "EDT": -240, "CST": -360, "CDT": -300,
        "MST": -420, "MDT": -360, "PST": -480, "PDT": -420,
        "WET": 0, "WEST": 60, "CET": 60, "CEST": 120, "MET": 60, "MEST": 120, "EET": 120, "EEST": 180, "MSK": 180,
        "JST": 540, "KST": 540, "HKT": 480, "SGT": 480, "AWST": 480, "ACST": 570, "ACDT": 630, "AEST": 600, "AEDT": 660,
        "NZST": 720, "NZDT": 780, "HST": -600, "AKST": -540, "AKDT": -480, "AST": -240, "ADT": -180, "NST": -210, "NDT": -150,
    ]

    /// An RSS date (`pubDate`): RFC 822 with what feeds do to it (numeric or
    /// named zones, no seconds, two-digit years, no weekday); failing that,
    /// W3CDTF, which some feeds write there. Nil when it is neither.
    static func rfc822(_ text: String) -> String? {
        parseRFC822(text) ?? w3cdtf(text)
    }

    /// A W3CDTF / ISO 8601 date (`2003-06-10`, `2003-06-10T04:00:00.5+02:00`)
    /// as RFC 3339 in UTC; nil when it is not one.
    static func w3cdtf(_ text: String) -> String? {
        let b = Array(text.utf8.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D })
        var i = 0
        func number(_ width: Int) -> Int? {
            guard i + width <= b.count, b[i..<i + width].allSatisfy(ASCII.isDigit) else { return nil }
            defer { i += width }
            return b[i..<i + width].reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        func take(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = number(4) else { return nil }
        var month = 1, day = 1, hour = 0, minute = 0, second = 0, offset = 0
        if take(0x2D) {  // -
            guard let m = number(2) else { return nil }
            month = m
            if take(0x2D) {
                guard let d = number(2) else { return nil }
                day = d
                if i < b.count, b[i] == 0x54 || b[i] == 0x74 || b[i] == 0x20 {  // T, t or a space
                    i += 1
                    guard let h = number(2), take(0x3A), let mi = number(2) else { return nil }
                    hour = h
                    minute = mi
                    if take(0x3A) {
                        guard let s = number(2) else { return nil }
                        second = s
                        if take(0x2E) || take(0x2C) {  // a fraction, dropped
                            guard i < b.count, ASCII.isDigit(b[i]) else { return nil }
                            while i < b.count, ASCII.isDigit(b[i]) { i += 1 }
                        }
                    }
                    // No zone (not W3CDTF, but written): read as UTC.
                    let zoneText = String(decoding: b[i...], as: UTF8.self).trimmingXMLSpace()
                    guard let zone = zoneText.isEmpty ? 0 : zoneOffset(zoneText) else { return nil }
                    offset = zone
                    i = b.count
                }
            }
        }
        guard String(decoding: b[i...], as: UTF8.self).trimmingXMLSpace().isEmpty else { return nil }
        return rfc3339(year: year, month: month, day: day, hour: hour, minute: minute, second: second, offset: offset)
    }

    private static func parseRFC822(_ text: String) -> String? {
        var tokens = withoutComments(text).split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\t" || $0 == "\n" || $0 == "\r" })
            .map(String.init)
        // The weekday is optional, and not checked against the date.
        if let first = tokens.first, first.first?.isLetter == true, monthNumber(first) == nil { tokens.removeFirst() }
        // The month first, as JavaScript's Date.toString writes it (`Jan 10
        // 2024 14:01:02 GMT+0000`) or C's asctime (`Jan 10 14:01:02 2024`).
        if tokens.count >= 4, monthNumber(tokens[0]) != nil {
            tokens.swapAt(0, 1)
            if tokens[2].contains(":") { tokens.swapAt(2, 3) }
        }
        guard tokens.count == 4 || tokens.count == 5,
              let day = Int(tokens[0]), tokens[0].utf8.allSatisfy(ASCII.isDigit),
              let month = monthNumber(tokens[1]),
              tokens[2].utf8.allSatisfy(ASCII.isDigit), let shortYear = Int(tokens[2]),
              tokens[2].count == 2 || tokens[2].count == 4 else { return nil }
        let year = tokens[2].count == 2 ? (shortYear < 50 ? 2000 + shortYear : 1900 + shortYear) : shortYear
        // A fraction of the second (`04:00:00.123`) is dropped.
        let time = tokens[3].split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard time.count == 1 || (time[1].utf8.allSatisfy(ASCII.isDigit) && !time[1].isEmpty && time[0].filter({ $0 == ":" }).count == 2) else {
            return nil
        }
        let clock = time[0].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 2 || clock.count == 3,
              clock.allSatisfy({ (1...2).contains($0.count) && $0.utf8.allSatisfy(ASCII.isDigit) }),
              let hour = Int(clock[0]), let minute = Int(clock[1]) else { return nil }
        let second = clock.count == 3 ? Int(clock[2]) ?? -1 : 0
        // No zone at all: read as UTC, which is what a feed without one most likely means.
        guard let offset = tokens.count == 5 ? zoneOffset(tokens[4]) : 0 else { return nil }
        return rfc3339(year: year, month: month, day: day, hour: hour, minute: minute, second: second, offset: offset)
    }

    /// `Jun`, `jun`, `June`: the month by its first three letters.
    private static func monthNumber(_ token: String) -> Int? {
        guard token.count >= 3, token.allSatisfy(\.isLetter) else { return nil }
        return months.firstIndex(of: String(token.prefix(3)).lowercased()).map { $0 + 1 }
    }

    /// `text` without RFC 822's comments, `(...)`: JavaScript's
    /// Date.toString ends with one (`(Coordinated Universal Time)`).
    private static func withoutComments(_ text: String) -> String {
        guard text.contains("(") else { return text }
        var out = ""
        var depth = 0
        for c in text {
            if c == "(" { depth += 1; out.append(" "); continue }
            if c == ")", depth > 0 { depth -= 1; continue }
            if depth == 0 { out.append(c) }
        }
        return out
    }

    /// Minutes east of UTC: a named zone, `+0200`, `-05:00`, `+02`, and
    /// `GMT+0100` or `UTC-05:00` (a numeric offset after a name of UTC).
    private static func zoneOffset(_ zone: String) -> Int? {
        if let named = zones[zone.uppercased()] { return named }
        for utc in ["GMT", "UTC", "UT"] where zone.uppercased().hasPrefix(utc) {
            let rest = zone.dropFirst(utc.count)
            if rest.first == "+" || rest.first == "-" { return zoneOffset(String(rest)) }
        }
        let b = Array(zone.utf8)
        guard b.count >= 3, b[0] == 0x2B || b[0] == 0x2D else { return nil }
        let digits = b.dropFirst().filter { $0 != 0x3A }
        guard digits.count == 2 || digits.count == 4, digits.allSatisfy(ASCII.isDigit),
              b.count == 1 + digits.count || (b.count == 6 && b[3] == 0x3A) else { return nil }
        let values = digits.map { Int($0 - 0x30) }
        let hours = values[0] * 10 + values[1]
        let minutes = values.count == 4 ? values[2] * 10 + values[3] : 0
        guard hours <= 23, minutes <= 59 else { return nil }
        return (b[0] == 0x2D ? -1 : 1) * (hours * 60 + minutes)
    }

    /// The instant as RFC 3339 in UTC, or nil when the fields are no real date and time.
    private static func rfc3339(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, offset: Int) -> String? {
        guard (1...9999).contains(year), (1...12).contains(month), (1...daysIn(month, of: year)).contains(day),
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) else { return nil }
        let seconds = HTTPDate.days(year: year, month: month, day: day) * 86400
            + Int64(hour * 3600 + minute * 60 + second) - Int64(offset * 60)
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let rest = Int(seconds - days * 86400)
        let civil = civil(fromDays: days)
        guard (1...9999).contains(civil.year) else { return nil }
        return "\(pad(civil.year, 4))-\(pad(civil.month, 2))-\(pad(civil.day, 2))T"
            + "\(pad(rest / 3600, 2)):\(pad(rest / 60 % 60, 2)):\(pad(rest % 60, 2))Z"
    }

    private static func daysIn(_ month: Int, of year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// The date `days` after 1970-01-01 (Howard Hinnant's civil_from_days).
    static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
}
