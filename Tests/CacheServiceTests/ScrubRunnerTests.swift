import Foundation
import Testing
@testable import CacheService
import CacheStore
import CacheSystem

/// `ScrubRunner` alone, on its real thread, over a store kept in memory
/// here: what a pass checks and counts, what it saves, where it resumes.
/// The real store under it is exercised by ScrubTests (IntegrationTests).
@Suite struct ScrubRunnerTests {
    /// Objects by hash, with what re-hashing each finds; `scrub.state` in memory.
    final class MemoryStore: ScrubStore {
        let objects: [ObjectRef]
        let findings: [Hash128: StoreError]
        let state = Locked<ScrubStateFile>(.absent)
        let writes = Locked(0)
        /// The position each pass asked for its objects after.
        let asked = Locked<[Hash128?]>([])

        init(count: Int, findings: [Int: (Hash128) -> StoreError] = [:]) {
            objects = (0..<count).map { ObjectRef(hash: Hash128(high: 0, low: UInt64($0 + 1)), size: 100, type: .png) }
            var f: [Hash128: StoreError] = [:]
            for (i, make) in findings { f[objects[i].hash] = make(objects[i].hash) }
            self.findings = f
        }

        func readScrubState() -> ScrubStateFile { state.withLock { $0 } }
        func writeScrubState(_ scrub: ScrubState) throws(StoreError) {
            state.withLock { $0 = .found(scrub) }
            writes.withLock { $0 += 1 }
        }
        func objectsInHashOrder(after position: Hash128?) -> [ObjectRef] {
            asked.withLock { $0.append(position) }
            return objects.filter { position == nil || $0.hash > position! }
        }
        func objectRef(_ hash: Hash128) -> ObjectRef? { objects.first { $0.hash == hash } }
        func rehash(_ hash: Hash128) throws(StoreError) {
            if let e = findings[hash] { throw e }
        }
        var saved: ScrubState? { if case .found(let s) = readScrubState() { return s } else { return nil } }
    }

    static func runner(_ store: MemoryStore, _ settings: ScrubSettings, repaired: Locked<[Hash128]> = Locked([])) -> ScrubRunner {
        ScrubRunner(settings, store: store, log: Logger(level: .error, environment: [:])) { hash, back in
            repaired.withLock { $0.append(hash) }
            back(false)
        }
    }

    /// Polls `condition` for up to 20 s.
    static func eventually(_ condition: () -> Bool) -> Bool {
        for _ in 0..<2000 {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    @Test func aPassChecksEveryObjectCountsWhatItFindsAndSavesItsEnd() {
        let store = MemoryStore(count: 6, findings: [
            1: { .corruptObject($0, quarantinedTo: nil, rows: []) },
            3: { .missingObject($0, rows: []) },
        ])
        let repaired = Locked<[Hash128]>([])
        // Started at once by a damaged state; a week before the next pass.
        store.state.withLock { $0 = .damaged("scrub.state: not a scrub state") }
        let scrub = Self.runner(store, ScrubSettings(interval: .seconds(604_800), rate: 1 << 30), repaired: repaired)
        scrub.start()
        defer { scrub.stop() }
        #expect(Self.eventually { scrub.status().last != nil }, "no pass finished: \(scrub.status())")
        let last = scrub.status().last
        #expect(last?.checked == ScrubStatus.Counts(ScrubTotals(objects: 6, bytes: 600, corrupt: 1, unreadable: 0, missing: 1)))
        #expect(repaired.withLock { $0 } == [store.objects[1].hash], "the corrupt one's repair is awaited; a missing file has none")
        #expect(store.saved?.last != nil && store.saved?.current == nil, "its end is saved")
    }

    @Test func aStopMidPassSavesThePositionAndTheNextRunnerResumesThere() {
        let store = MemoryStore(count: 50)
        // 100 bytes a second: one object a second, so the stop comes mid-pass
        // (started at once by a damaged state; a week before any next pass).
        store.state.withLock { $0 = .damaged("scrub.state: not a scrub state") }
        let first = Self.runner(store, ScrubSettings(interval: .seconds(604_800), rate: 100))
        first.start()
        #expect(Self.eventually { (first.status().pass?.checked.objects ?? 0) >= 1 })
        first.stop()
        let position = store.saved?.current?.position
        #expect(position != nil, "the position is saved at the stop")
        let checked = store.saved?.current?.totals.objects ?? 0
        #expect(checked >= 1 && checked < 50)

        let second = Self.runner(store, ScrubSettings(interval: .seconds(604_800), rate: 1 << 30))
        second.start()
        defer { second.stop() }
        #expect(Self.eventually { second.status().last != nil })
        #expect(store.asked.withLock { $0 } == [nil, position], "the first pass from the start, then resumed after the object it had reached")
        #expect(second.status().last?.checked.objects == 50, "the pass counts the objects before and after the restart")
    }

    @Test func aDamagedStateStartsANewPassAtOnce() {
        let store = MemoryStore(count: 3)
        store.state.withLock { $0 = .damaged("scrub.state: not a scrub state") }
        // An interval of a week: without the damage the first pass would wait ten minutes.
        let scrub = Self.runner(store, ScrubSettings(interval: .seconds(604_800), rate: 1 << 30))
        scrub.start()
        defer { scrub.stop() }
        #expect(Self.eventually { scrub.status().last != nil }, "\(scrub.status())")
    }

    @Test func scrubIntervalZeroRunsNoPass() {
        let store = MemoryStore(count: 3)
        let scrub = Self.runner(store, ScrubSettings(interval: .zero, rate: 1 << 30))
        scrub.start()
        usleep(300_000)
        #expect(scrub.status().state == .off && store.asked.withLock { $0 }.isEmpty)
        scrub.stop()
    }
}
