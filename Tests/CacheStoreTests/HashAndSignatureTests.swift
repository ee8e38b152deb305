import CacheSystem
import Testing
@testable import CacheStore

@Suite struct Hash128Tests {
    @Test func canonicalHexMatchesXxhsum() {
        // Values printed by `xxhsum -H2` for the same input.
        #expect(Hash128(of: [UInt8]()).hex == "99aa06d3014798d86001c324468d497f")
        #expect(Hash128(of: Array("hello".utf8)).hex == "b5e9c1ad071b3e7fc779cfaa5e523818")
        #expect(Hash128(of: Array("The quick brown fox".utf8)).hex == "b2c100c26f5d723ab7859350537dfedc")
    }

    @Test func streamingEqualsOneShot() {
        let data = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var h = StreamingHasher()
        for chunk in stride(from: 0, to: data.count, by: 4097) {
            data[chunk..<min(data.count, chunk + 4097)].withUnsafeBytes { h.update($0) }
        }
        #expect(h.digest() == Hash128(of: data))
    }

    @Test func hexRoundTripsAndRejectsOtherForms() {
        let h = Hash128(of: Array("x".utf8))
        #expect(Hash128(hex: h.hex) == h)
        #expect(Hash128(bytes: h.bytes) == h)
        #expect(Hash128(hex: h.hex.uppercased()) == nil)
        #expect(Hash128(hex: String(h.hex.dropLast())) == nil)
        #expect(Hash128(hex: "../../../../etc/passwd000000000000") == nil)
        #expect(Hash128(hex: String(repeating: "g", count: 32)) == nil)
    }
}

@Suite struct ImageSignatureTests {
    @Test func recognisesImageFormats() {
        #expect(ImageType.detect([0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10]) == .jpeg)
        #expect(ImageType.detect([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0]) == .png)
        #expect(ImageType.detect(Array("GIF89a....".utf8)) == .gif)
        #expect(ImageType.detect(Array("GIF87a....".utf8)) == .gif)
        #expect(ImageType.detect(Array("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ".utf8)) == .webp)
    }

    @Test func rejectsErrorPagesAndShortBodies() {
        #expect(ImageType.detect(Array("<!DOCTYPE html><html>".utf8)) == nil)
        #expect(ImageType.describeNonImage(Array("<!DOCTYPE html><html>".utf8)) == "HTML")
        #expect(ImageType.detect(Array("{\"error\": 1}".utf8)) == nil)
        #expect(ImageType.detect([0x89, 0x50]) == nil)
        #expect(ImageType.detect([]) == nil)
        #expect(ImageType.detect(Array("RIFF\u{0}\u{0}\u{0}\u{0}WAVEfmt ".utf8)) == nil)
    }

    @Test func mimeTypes() {
        #expect(ImageType.png.mimeType == "image/png")
        #expect(ImageType.jpeg.mimeType == "image/jpeg")
    }
}

@Suite struct ObjectNameTests {
    @Test func anObjectsPathIsItsHashSplitAfterTwoDigits() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let hash = Hash128(high: generator.next(), low: generator.next())
            let hex = hash.hex
            #expect(Store.objectRelativePath(hash) == "objects/\(hex.prefix(2))/\(hex.dropFirst(2))")
        }
        #expect(Store.objectRelativePath(Hash128(high: 0, low: 1)) == "objects/00/000000000000000000000000000001")
    }
}
