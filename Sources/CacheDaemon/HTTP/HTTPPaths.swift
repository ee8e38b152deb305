import CacheProtocol
import CacheService

/// Store paths stay out of HTTP answers unless `http-show-paths` is set
/// (docs/http.md): behind a proxy they would tell anyone where the store
/// and its quarantine are. The socket's answers keep them.
extension HTTPFrontEnd {
    /// `message` as an HTTP answer may carry it.
    func shown(_ message: String) -> String { showPaths ? message : Self.withoutPaths(message) }

    /// A prefetch's report with the rows' errors as an HTTP answer may carry them.
    func shown(_ report: PrefetchReport) -> PrefetchReport {
        guard !showPaths, report.images != nil else { return report }
        var r = report
        for i in r.images!.failures.indices { r.images!.failures[i].error = Self.withoutPaths(r.images!.failures[i].error) }
        return r
    }

    /// Every absolute file path in `message` (a `/` at its start or after a
    /// space, `(`, `"`, `'` or `=`, up to a space, `)`, `"`, `'`, `;` or
    /// `,`) replaced by `<path>`. URLs keep their paths (a `/` there follows
    /// `:`, `/` or a name).
    static func withoutPaths(_ message: String) -> String {
        let starts: Set<Character> = [" ", "(", "\"", "'", "="], ends: Set<Character> = [" ", ")", "\"", "'", ";", ","]
        var out = "", inPath = false, previous: Character? = nil
        for c in message {
            if inPath {
                if ends.contains(c) { inPath = false; out.append(c) }
            } else if c == "/" && (previous == nil || starts.contains(previous!)) {
                inPath = true
                out += "<path>"
            } else {
                out.append(c)
            }
            previous = c
        }
        return out
    }
}
