import Testing
@testable import CacheService
import CacheStore
import CacheSystem
import CacheVariant

/// What `VariantRefusals` remembers, for what and how long (docs/operations.md,
/// "Image variants"), on a clock the test moves: the original's failures for
/// every variant of it, a variant's for that variant alone, the backoff
/// doubled with each failure again up to 32 times, a refusal while the
/// settings stand, a variant made clearing its original's record.
@Suite struct VariantRefusalsTests {
    static let a = Hash128(high: 1, low: 1), b = Hash128(high: 2, low: 2)
    static func key(_ source: Hash128, width: Int) -> VariantKey {
        VariantKey(source: source, spec: VariantSpec(width: width, height: nil, fit: .contain, format: .webp))
    }
    static let minute = Duration.seconds(60)
    static let second: UInt64 = 1_000_000_000

    @Test func aHelperFailureIsTheOriginalsForEveryVariantOfIt() {
        var r = VariantRefusals()
        let error = r.note(Self.key(Self.a, width: 64), .helperFailed("it took longer than variant-timeout"),
                           retryAfter: Self.minute, now: 0, wallSeconds: 0)
        #expect(error.description == "the variant helper failed: it took longer than variant-timeout; remembered for this image: "
                + "every variant of it fails at once until 1970-01-01T00:01:00Z or until its bytes change")
        #expect(r.refusal(Self.key(Self.a, width: 300), now: 59 * Self.second)?.description == error.description)
        #expect(r.refusal(Self.key(Self.b, width: 64), now: 0) == nil, "another original")
        #expect(r.refusal(Self.key(Self.a, width: 300), now: 60 * Self.second) == nil, "tried again after the backoff")
        #expect(r.failedBefore(Self.a) && !r.failedBefore(Self.b), "still on record: its jobs are suspect")
        r.made(Self.a)
        #expect(!r.failedBefore(Self.a))
    }

    @Test func theBackoffDoublesUpToThirtyTwoTimes() {
        var r = VariantRefusals()
        var now: UInt64 = 0
        for (failure, backoff) in [1, 2, 4, 8, 16, 32, 32].enumerated() {
            _ = r.note(Self.key(Self.a, width: 64 + failure), .helperFailed("killed"), retryAfter: Self.minute, now: now, wallSeconds: 0)
            let until = now + UInt64(backoff) * 60 * Self.second
            #expect(r.refusal(Self.key(Self.a, width: 1), now: until - 1) != nil, "failure \(failure + 1)")
            #expect(r.refusal(Self.key(Self.a, width: 1), now: until) == nil, "failure \(failure + 1)")
            now = until
        }
    }

    @Test func aVariantsOwnFailureIsThatVariantsAlone() {
        var r = VariantRefusals()
        let error = r.note(Self.key(Self.a, width: 64), .notMade("the variant is 9 bytes, over the 8 bytes the daemon takes"),
                           retryAfter: Self.minute, now: 0, wallSeconds: 0)
        #expect(error.description.hasSuffix("; remembered for this variant until 1970-01-01T00:01:00Z"), "\(error)")
        #expect(r.refusal(Self.key(Self.a, width: 64), now: 0) != nil)
        #expect(r.refusal(Self.key(Self.a, width: 96), now: 0) == nil)
        #expect(!r.failedBefore(Self.a))
    }

    @Test func aRefusalStandsWhileTheSettingsDo() {
        var r = VariantRefusals()
        let error = r.note(Self.key(Self.a, width: 64), .refused("decoding failed"), retryAfter: Self.minute, now: 0, wallSeconds: 0)
        #expect(error.description.hasSuffix("remembered for this image: every variant of it fails at once while the variant settings stand"))
        #expect(r.refusal(Self.key(Self.a, width: 96), now: .max) != nil)
        r.removeAll()
        #expect(r.refusal(Self.key(Self.a, width: 96), now: 0) == nil)
    }

    @Test func wallTimeIsRFC3339InUTC() {
        #expect(VariantRefusals.utc(0) == "1970-01-01T00:00:00Z")
        #expect(VariantRefusals.utc(1_796_410_330) == "2026-12-04T18:52:10Z")
    }
}
