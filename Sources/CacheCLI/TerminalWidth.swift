/// How many terminal cells a string takes: what lines up `get posts`' ID
/// and USER columns when an id or a user name is Chinese, Japanese, Korean
/// or an emoji, each of which a terminal draws two cells wide.
///
/// By grapheme cluster (a `Character`): a base letter and its combining
/// marks, or an emoji sequence joined by ZWJ, take the cells of their first
/// scalar. Wide are the East Asian Wide and Fullwidth blocks (Unicode
/// Standard Annex #11) and the scalars drawn as emoji by default, or asked
/// to be by the variation selector U+FE0F; control characters never reach
/// here (`Format.visible` has escaped them). What `wcwidth(3)` gives in a
/// UTF-8 locale, without depending on the locale cachectl runs in.
enum TerminalWidth {
    /// The cells `s` takes.
    static func cells(_ s: String) -> Int {
        var n = 0
        for c in s {
            if c.isASCII { n += 1; continue }
            n += isWide(c) ? 2 : 1
        }
        return n
    }

    static func isWide(_ c: Character) -> Bool {
        guard let first = c.unicodeScalars.first else { return false }
        if first.properties.isEmojiPresentation { return true }
        if first.properties.isEmoji, c.unicodeScalars.contains(where: { $0.value == 0xFE0F }) { return true }
        return wideRanges.contains { $0.contains(first.value) }
    }

    /// The East Asian Wide (W) and Fullwidth (F) blocks of UAX #11.
    static let wideRanges: [ClosedRange<UInt32>] = [
        0x1100...0x115F,  // Hangul Jamo, leading consonants
        0x2E80...0x303E,  // CJK radicals, Kangxi, ideographic description, CJK symbols and punctuation
        0x3041...0x33FF,  // Hiragana, Katakana, Bopomofo, Hangul compatibility Jamo, Kanbun, CJK compatibility
        0x3400...0x4DBF,  // CJK extension A
        0x4E00...0x9FFF,  // CJK unified ideographs
        0xA000...0xA4CF,  // Yi
        0xA960...0xA97F,  // Hangul Jamo extended A
        0xAC00...0xD7A3,  // Hangul syllables
        0xF900...0xFAFF,  // CJK compatibility ideographs
        0xFE10...0xFE19,  // vertical forms
        0xFE30...0xFE6F,  // CJK compatibility forms, small form variants
        0xFF00...0xFF60,  // fullwidth forms
        0xFFE0...0xFFE6,  // fullwidth signs
        0x1B000...0x1B2FF,  // Kana supplement and extended
        0x20000...0x2FFFD,  // CJK extensions B to F, compatibility supplement
        0x30000...0x3FFFD,  // CJK extensions G and H
    ]
}
