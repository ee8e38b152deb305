import Testing
import CacheHTTP

/// `HTTPGrammar` against what each of its callers accepted when it wrote
/// the rule itself (copied below as it was): the request parser
/// (CacheHTTP's `HTTPParser`), the response header and Link parsers
/// (CacheFetch's `HeaderField`, `LinkHeader`) and the stored validators
/// (CacheSystem's `HTTPFieldValue.isSafe`). Every byte, and values.
@Suite struct HTTPGrammarTests {
    /// `HTTPParser.isTokenByte`, as it was.
    static func parserToken(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): return true
        default: return false
        }
    }

    /// `HeaderField.isTokenByte` and `LinkHeader`'s token bytes, as they were.
    static func fetchToken(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(b)
        }
    }

    /// `HTTPParser.isFieldValueByte`, as it was.
    static func parserValueByte(_ b: UInt8) -> Bool { b == 0x09 || (b >= 0x20 && b != 0x7F) }

    /// `HTTPFieldValue.isSafe` (CacheStore's validators, `HeaderField`, `FetchHeader`), as it was.
    static func wasSafe(_ value: [UInt8]) -> Bool {
        guard let first = value.first else { return true }
        if first == 0x20 || first == 0x09 { return false }
        var last = first
        for b in value {
            if (b < 0x20 && b != 0x09) || b == 0x7F { return false }
            last = b
        }
        return last != 0x20 && last != 0x09
    }

    @Test func everyByteIsATokenByteExactlyWhereEachCallerSaidSo() {
        for b in UInt8.min...UInt8.max {
            #expect(HTTPGrammar.isTokenByte(b) == Self.parserToken(b), "byte \(b)")
            #expect(HTTPGrammar.isTokenByte(b) == Self.fetchToken(b), "byte \(b)")
        }
        // 77 of them: 62 letters and digits, 15 marks.
        #expect((UInt8.min...UInt8.max).filter(HTTPGrammar.isTokenByte).count == 77)
    }

    @Test func everyByteIsAFieldValueByteExactlyWhereEachCallerSaidSo() {
        for b in UInt8.min...UInt8.max {
            #expect(HTTPGrammar.isFieldValueByte(b) == Self.parserValueByte(b), "byte \(b)")
            // A one-byte value that is not whitespace is a value exactly when its byte is.
            if b != 0x20 && b != 0x09 { #expect(HTTPGrammar.isFieldValue([b]) == Self.wasSafe([b]), "byte \(b)") }
            #expect(HTTPGrammar.isWhitespace(b) == (b == 0x20 || b == 0x09), "byte \(b)")
        }
    }

    @Test func tokens() {
        #expect(HTTPGrammar.isToken(Array("Content-Type".utf8)))
        #expect(HTTPGrammar.isToken(Array("!#$%&'*+-.^_`|~09azAZ".utf8)))
        #expect(!HTTPGrammar.isToken([]))
        #expect(!HTTPGrammar.isToken(Array("Bad Name".utf8)))
        #expect(!HTTPGrammar.isToken(Array("a:b".utf8)))
        #expect(!HTTPGrammar.isToken(Array("caf\u{E9}".utf8)))
    }

    /// Whole values as `HTTPFieldValue.isSafe` judged them: the RFC's
    /// field-value (no SP or HTAB first or last), and every value the
    /// parsers kept once trimmed.
    @Test func fieldValuesAreWhatTheyWere() {
        let values: [String] = [
            "", "\"abc\"", "W/\"x\"", "Mon, 30 Nov 2026 11:54:36 GMT", "caf\u{E9}", "a \t b", "x",
            " x", "x ", "\tx", "x\t", " ", "\t", "a\rb", "a\nb", "a\u{0}b", "a\u{7F}", "\"abc\"\r\n", "a\u{1B}[31m",
            "\u{85}", "\u{2028}", "Bearer abc.def-ghi",
        ]
        for v in values {
            #expect(HTTPGrammar.isFieldValue(v) == Self.wasSafe(Array(v.utf8)), "\(Array(v.utf8))")
            #expect(HTTPGrammar.isFieldValue(Array(v.utf8)[...]) == HTTPGrammar.isFieldValue(v), "\(Array(v.utf8))")
        }
        // And every two-byte value.
        var differ: [[UInt8]] = []
        for a in UInt8.min...UInt8.max {
            for b in UInt8.min...UInt8.max where HTTPGrammar.isFieldValue([a, b]) != Self.wasSafe([a, b]) { differ.append([a, b]) }
        }
        #expect(differ.isEmpty, "\(differ.prefix(10))")
    }
}
