import Foundation
import Testing
import CacheSystem
import CacheVariant
import TestSupport

/// The helper pool (`VariantHelpers`) alone, without a daemon or a store:
/// the real `cached-variant` makes a variant; a helper that misbehaves
/// (Tests/Fixtures/bad-helper.py installed as `cached-variant`) fails its
/// job saying why, is replaced, and the next job is served by a new one.
@Suite struct HelperPoolTests {
    static let fixtures = FaultOrigin.packageRoot + "/Tests/Fixtures/"
    static let sample = fixtures + "images/sample.png"

    /// The built helper beside the test runner (as IntegrationTests finds the daemon).
    static let realHelper: String = {
        if let dir = ProcessInfo.processInfo.environment["CACHED_BIN_DIR"] { return dir + "/cached-variant" }
        let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        for candidate in [runner.deletingLastPathComponent(), runner.deletingLastPathComponent().deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent("cached-variant").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return FaultOrigin.packageRoot + "/.build/debug/cached-variant"
    }()

    /// bad-helper.py linked into a directory of its own with `mode`; the
    /// path of the link (`remove` deletes its directory).
    static func badHelper(_ mode: String) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cached-helper-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // A link to the script in the tree, not a copy: an executable this
        // process had just written could still be open for writing in a
        // child another test spawned meanwhile (exec fails with ETXTBSY).
        // The script finds its mode beside the link (it does not resolve it).
        try FileManager.default.createSymbolicLink(atPath: dir + "/cached-variant", withDestinationPath: fixtures + "bad-helper.py")
        try FileManager.default.copyItem(atPath: sample, toPath: dir + "/bad-helper.png")
        try Data((mode + "\n").utf8).write(to: URL(fileURLWithPath: dir + "/bad-helper.mode"))
        return dir + "/cached-variant"
    }

    static func remove(_ helper: String) {
        try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: helper).deletingLastPathComponent().path)
    }

    /// One helper at a time; the timeouts the defaults unless a mode needs them short.
    static func pool(_ executable: String, jobTimeout: Duration? = nil, startTimeout: Duration? = nil) -> VariantHelpers {
        var c = VariantPoolConfiguration(executable: executable)
        c.helpers = 1
        if let jobTimeout { c.jobTimeout = jobTimeout }
        if let startTimeout { c.startTimeout = startTimeout }
        return VariantHelpers(c, log: Logger(level: .error, environment: [:]))
    }

    /// A 32-pixel PNG of the sample, as the daemon would ask it.
    static func job() throws -> VariantJob {
        let fd = try FileDescriptor.open(sample, .readOnly)
        let size = try #require(try? FileManager.default.attributesOfItem(atPath: sample)[.size] as? Int)
        return VariantJob(spec: VariantSpec(width: 32, height: nil, fit: .contain, format: .png), source: fd,
                          sourceSize: Int64(size), maxDimension: 2048, maxPixels: 100_000_000, maxResult: 1 << 20)
    }

    static func run(_ pool: VariantHelpers) async throws -> Result<MadeVariant, VariantFailure> {
        let job = try job()
        return await withCheckedContinuation { done in pool.submit(job) { done.resume(returning: $0) } }
    }

    @Test func theRealHelperMakesAVariantAndIsKept() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.realHelper), "no helper at \(Self.realHelper): build it first")
        let pool = Self.pool(Self.realHelper)
        defer { pool.stop() }
        for _ in 0..<2 {
            let made = try await Self.run(pool).get()
            #expect(made.width == 32 && Array(made.bytes.prefix(4)) == [0x89, 0x50, 0x4E, 0x47], "a PNG 32 wide")
        }
        #expect(pool.stats.started == 1 && pool.stats.replaced == 0, "one helper served both: \(pool.stats)")
    }

    @Test(arguments: [
        ("huge", "it announced 1099511627776 bytes, over the bound"),
        ("extra", "bytes past its result"),
        ("silent", "variant-timeout"),
        ("exit", "exited with status 3"),
        ("garbage", "it broke the protocol"),
    ])
    func aHelperThatMisbehavesInAJobIsReplaced(_ mode: String, _ why: String) async throws {
        let helper = try Self.badHelper(mode)
        let pool = Self.pool(helper, jobTimeout: mode == "silent" ? .seconds(2) : nil)
        defer { pool.stop(); Self.remove(helper) }
        for attempt in 1...2 {
            let result = try await Self.run(pool)
            guard case .failure(let failure) = result else { Issue.record("\(mode): made a variant: \(result)"); return }
            #expect(failure.description.contains(why), "\(mode), job \(attempt): \(failure)")
        }
        #expect(pool.stats.started == 2 && pool.stats.replaced == 2 && pool.stats.running == 0, "\(mode): \(pool.stats)")
    }

    @Test func aHelperWithoutASandboxIsNeverGivenAJob() async throws {
        let helper = try Self.badHelper("unsandboxed")
        let pool = Self.pool(helper)
        defer { pool.stop(); Self.remove(helper) }
        let result = try await Self.run(pool)
        guard case .failure(.unavailable(let why)) = result else { Issue.record("not refused: \(result)"); return }
        #expect(why.contains("not sandboxed"), "\(why)")
        #expect(pool.stats.running == 0)
    }

    @Test func aHelperThatNeverSaysReadyIsGivenUpOnAtTheStartTimeout() async throws {
        let helper = try Self.badHelper("mute")
        let pool = Self.pool(helper, startTimeout: .seconds(2))
        defer { pool.stop(); Self.remove(helper) }
        let result = try await Self.run(pool)
        guard case .failure(.unavailable(let why)) = result else { Issue.record("not unavailable: \(result)"); return }
        #expect(why.contains("ready"), "\(why)")
        #expect(pool.stats.running == 0)
    }

    @Test func aRefusedImageReplacesTheHelperWithoutCountingAFailure() async throws {
        let helper = try Self.badHelper("refuse")
        let pool = Self.pool(helper)
        defer { pool.stop(); Self.remove(helper) }
        let result = try await Self.run(pool)
        guard case .failure(.refused(let why)) = result else { Issue.record("not refused: \(result)"); return }
        #expect(why.contains("not an image this helper likes"))
        _ = try await Self.run(pool)
        #expect(pool.stats.started == 2 && pool.stats.replaced == 0, "a new helper for the next job, not a failure: \(pool.stats)")
    }

    @Test func aStoppedPoolRefusesNewJobs() async throws {
        let helper = try Self.badHelper("silent")
        defer { Self.remove(helper) }
        let pool = Self.pool(helper)
        pool.stop()
        let result = try await Self.run(pool)
        #expect(result == .failure(.stopped))
    }
}
