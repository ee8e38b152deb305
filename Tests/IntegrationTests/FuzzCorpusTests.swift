import Foundation
import Testing

/// Every seed and every input a fuzzer ever crashed on, run once through its
/// target in the normal build (Tests/Fuzz/corpus, Tests/Fuzz/regressions).
@Suite struct FuzzCorpusTests {
    @Test(arguments: ["request", "record", "feeds", "config"])
    func theCorpusAndRegressionsRunWithoutACrash(_ target: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Paths.binDir + "/cached-fuzz")
        p.arguments = [target, Paths.packageRoot + "/Tests/Fuzz/corpus/" + target, Paths.packageRoot + "/Tests/Fuzz/regressions/" + target]
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(out)")
        #expect(out.contains("no crash"), "\(out)")
    }
}
