import Foundation
import Testing

/// Every seed and every input a fuzzer ever crashed on, run once through its
/// target in the normal build (Tests/Fuzz/corpus, Tests/Fuzz/regressions).
@Suite struct FuzzCorpusTests {
    @Test(arguments: ["request", "record", "feeds", "config", "http"])
    func theCorpusAndRegressionsRunWithoutACrash(_ target: String) throws {
        let (status, out) = try runProgram(Paths.binDir + "/cached-fuzz", [target, Paths.packageRoot + "/Tests/Fuzz/corpus/" + target,
                                                                           Paths.packageRoot + "/Tests/Fuzz/regressions/" + target])
        #expect(status == 0, "\(out)")
        #expect(out.contains("no crash"), "\(out)")
    }
}
