import Foundation
import Testing
@testable import CacheService
import CacheStore
import CacheSystem
import CacheVariant

/// `VariantMaker` alone, over a store and a helper pool kept in memory
/// here: what it asks of them and when. The real store and helpers are
/// exercised by VariantTests (IntegrationTests) and CacheVariantTests.
@Suite struct VariantMakerTests {
    /// A store of variants in memory; every original opens as /dev/null.
    final class MemoryStore: VariantStore {
        let variants = Locked<[VariantKey: VariantRef]>([:])
        let full = Locked(false)
        let unreadableOriginal = Locked(false)

        func variant(of source: Hash128, _ spec: VariantSpec) -> VariantRef? {
            variants.withLock { $0[VariantKey(source: source, spec: spec)] }
        }
        func objectFileLooksRight(_ ref: ObjectRef) -> Bool { true }
        func commitVariant(_ bytes: [UInt8], of source: Hash128, _ spec: VariantSpec, width: Int, height: Int,
                           maxSize: Int64) throws(StoreError) -> VariantRef {
            let v = VariantRef(object: ObjectRef(hash: Hash128(high: UInt64(bytes.count), low: UInt64(width)), size: Int64(bytes.count), type: .png),
                               width: width, height: height)
            variants.withLock { $0[VariantKey(source: source, spec: spec)] = v }
            return v
        }
        func checkHeadroom(_ minimum: Int64, needed: Int64) throws(StoreError) {
            if full.withLock({ $0 }) { throw .belowHeadroom(free: 0, minimum: minimum, needed: needed) }
        }
        func openVerifiedOriginal(_ hash: Hash128) throws(StoreError) -> (FileDescriptor, Int64) {
            if unreadableOriginal.withLock({ $0 }) { throw .io(SystemError("read", objectPath(hash), errno: EIO)) }
            do { return (try FileDescriptor.open("/dev/null", .readOnly), 10) } catch { throw .io(error) }
        }
        func objectPath(_ hash: Hash128) -> String { "/store/objects/\(hash.hex)" }
    }

    /// Jobs held until the test answers them.
    final class HeldRunner: VariantJobRunner {
        typealias Held = (job: VariantJob, completion: @Sendable (Result<MadeVariant, VariantFailure>) -> Void)
        let held = Locked<[Held]>([])
        let submitted = Locked(0)
        func submit(_ job: VariantJob, _ completion: @escaping @Sendable (Result<MadeVariant, VariantFailure>) -> Void) {
            submitted.withLock { $0 += 1 }
            held.withLock { $0.append((job, completion)) }
        }
        func apply(jobTimeout: Duration, memory: Int64) {}
        func stop() {}
        /// The jobs never answered: their originals' descriptors closed.
        deinit { for h in held.withLock({ $0 }) { h.job.source.close() } }
        /// Answers the oldest job held.
        func answer(_ result: Result<MadeVariant, VariantFailure>) {
            guard let next = held.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { Issue.record("no job held"); return }
            next.job.source.close()
            next.completion(result)
        }
        var waiting: Int { held.withLock { $0.count } }
    }

    struct Setup {
        let store = MemoryStore()
        let runner = HeldRunner()
        let counters = Locked(CounterValues())
        let unreadable = Locked<[String]>([])
        let maker: VariantMaker

        init(runner present: Bool = true) {
            let counters = counters, unreadable = unreadable
            maker = VariantMaker(store: store, runner: present ? runner : nil, settings: VariantSettings(),
                                 log: Logger(level: .error, environment: [:]), onWorker: { $0() },
                                 bounds: { (64 << 20, 0) },
                                 unreadable: { path, _ in unreadable.withLock { $0.append(path) } },
                                 count: { change in counters.withLock { change(&$0) } })
        }

        /// Asks for `spec` of `source`; the results, as they come.
        func ask(_ spec: VariantSpec, of source: ObjectRef = original, settings: VariantSettings = VariantSettings())
            -> Locked<[Result<VariantRef, CacheError>]> {
            let results = Locked<[Result<VariantRef, CacheError>]>([])
            maker.make(source, spec, settings) { r in results.withLock { $0.append(r) } }
            return results
        }
    }

    static let original = ObjectRef(hash: Hash128(high: 1, low: 2), size: 10, type: .png)
    static let small = VariantSpec(width: 32, height: nil, fit: .contain, format: .png)
    static let large = VariantSpec(width: 64, height: nil, fit: .contain, format: .png)
    static let made = MadeVariant(bytes: Array(repeating: 7, count: 20), width: 32, height: 24)

    @Test func manyAskingAtOnceMakeOneJob() {
        let s = Setup()
        let asked = (0..<5).map { _ in s.ask(Self.small) }
        #expect(s.runner.submitted.withLock { $0 } == 1 && s.runner.waiting == 1)
        s.runner.answer(.success(Self.made))
        for r in asked { #expect((try? r.withLock { $0 }.first?.get())?.width == 32) }
        let c = s.counters.withLock { $0 }
        #expect(c.coalesced == 4 && c.variantJobs == 1 && c.variantsMade == 1 && c.variantFailures == 0)
        // Stored: the next asks the store, not a helper.
        _ = s.ask(Self.small)
        #expect(s.runner.submitted.withLock { $0 } == 1)
    }

    @Test func aRefusedImageIsRememberedUntilTheSettingsChange() {
        let s = Setup()
        let first = s.ask(Self.small)
        s.runner.answer(.failure(.refused("not an image")))
        guard case .failure(.origin(let why))? = first.withLock({ $0.first }) else { Issue.record("\(first.withLock { $0 })"); return }
        #expect(why.reason.contains("not an image"))
        let again = s.ask(Self.small)
        #expect(s.runner.submitted.withLock { $0 } == 1 && again.withLock { $0.count } == 1, "answered from memory, no job")
        s.maker.apply(VariantSettings())
        _ = s.ask(Self.small)
        #expect(s.runner.submitted.withLock { $0 } == 2, "tried again under new settings")
    }

    @Test func anotherVariantOfTheSameOriginalWaitsForTheFirstJob() {
        let s = Setup()
        let first = s.ask(Self.small), second = s.ask(Self.large)
        #expect(s.runner.submitted.withLock { $0 } == 1, "one original at the helpers at a time")
        s.runner.answer(.success(Self.made))
        #expect(first.withLock { $0.count } == 1 && s.runner.submitted.withLock { $0 } == 2, "the second goes on after the first")
        s.runner.answer(.success(MadeVariant(bytes: [1, 2, 3], width: 64, height: 48)))
        #expect((try? second.withLock { $0 }.first?.get())?.width == 64)
    }

    @Test func aFailedOriginalIsRefusedForEveryVariantOfIt() {
        let s = Setup()
        _ = s.ask(Self.small)
        s.runner.answer(.failure(.helperFailed("killed by SIGSYS")))
        let refused = s.ask(Self.large)
        #expect(s.runner.submitted.withLock { $0 } == 1 && refused.withLock { $0.count } == 1, "answered from memory, no job")
    }

    @Test func anOriginalThatFailedBeforeIsTriedAsASuspectOnceItsWaitIsOver() {
        let s = Setup()
        var noWait = VariantSettings()
        noWait.retryAfter = .zero
        _ = s.ask(Self.small, settings: noWait)
        #expect(s.runner.held.withLock { $0.first?.job.suspect } == false)
        s.runner.answer(.failure(.helperFailed("killed by SIGSYS")))
        _ = s.ask(Self.large, settings: noWait)
        #expect(s.runner.held.withLock { $0.first?.job.suspect } == true)
        s.runner.answer(.success(Self.made))
        _ = s.ask(VariantSpec(width: 16, height: nil, fit: .contain, format: .png), settings: noWait)
        #expect(s.runner.held.withLock { $0.first?.job.suspect } == false, "a variant made clears the record")
    }

    @Test func withoutAHelperProgramEveryVariantIsUnavailableSayingWhy() {
        let s = Setup(runner: false)
        let r = s.ask(Self.small)
        guard case .failure(.unavailable(let why))? = r.withLock({ $0.first }) else { Issue.record("\(r.withLock { $0 })"); return }
        #expect(why.contains("cached-variant"))
        #expect(s.counters.withLock { $0.variantFailures } == 1)
    }

    @Test func aFullDiskMakesNoJob() {
        let s = Setup()
        s.store.full.withLock { $0 = true }
        let r = s.ask(Self.small)
        guard case .failure(.store(.belowHeadroom, _))? = r.withLock({ $0.first }) else { Issue.record("\(r.withLock { $0 })"); return }
        #expect(s.runner.submitted.withLock { $0 } == 0)
        // The trial ended: the next ask is not left waiting.
        s.store.full.withLock { $0 = false }
        _ = s.ask(Self.large)
        #expect(s.runner.submitted.withLock { $0 } == 1)
    }

    @Test func anUnreadableOriginalIsReportedToTheService() {
        let s = Setup()
        _ = s.ask(Self.small)
        s.runner.answer(.failure(.source(SystemError("read", "x", errno: EIO))))
        #expect(s.unreadable.withLock { $0 } == [s.store.objectPath(Self.original.hash)])
    }
}
