#if canImport(Glibc)
import Glibc
#endif
import CacheProtocol
import CachedClientCore

/// `get posts` and `get images`: the listing read page by page
/// (`ListingWalk`, 999 new entries a page, 1,000 a request), each page
/// printed and flushed as it arrives, so a store of a million posts is
/// listed in the memory of one page and its first line comes at once.
/// With `--offset` and `--limit`, that part of the listing alone, paged the
/// same way. `--json` prints each page as an answer line (the daemon's,
/// its entries cut to the page's new ones): one line when the listing fits
/// in a page, as before paging. A page that fails, or a listing that
/// changed between pages, stops the walk with the reason on stderr and a
/// status other than 0 (8 for a change: `ExitCode.changed`).
extension Commands {
    func list(_ kind: ListingWalk.Kind) throws {
        // Posts come from memory: each page must come within the timeout. The
        // manifest may be fetched first, so a page of rows may take longer.
        let client = connect(mayTakeLong: kind == .images)
        let query: [(String, JSON)] = invocation.query.map { [("query", .string($0))] } ?? []
        var walk = ListingWalk(kind, pageSize: ListingWalk.defaultPageSize, offset: invocation.offset ?? 0, count: invocation.limit)
        var table = Table(kind: kind)
        while let request = walk.nextRequest() {
            let answer: JSON
            do { answer = try client.answer(kind.op, request.fields + query) } catch { throw stopped(error, walk) }
            let page: ListingWalk.Page
            do {
                guard let taken = try walk.take(answer) else { continue }  // refused as too long: asked again, smaller
                page = taken
            } catch {
                if CachedError(answer: answer) != nil { try check(answer, stoppedAfter: walk.read > 0 ? Self.progress(walk) : nil) }
                throw stopped(error, walk)
            }
            if json { printJSON(page.answer) } else { print(table.lines(page), terminator: "") }
            fflush(nil)  // each page as it comes (stdout is a C global Swift 6 will not name)
        }
        if !json { print(table.footer(walk, paged: invocation.offset != nil || invocation.limit != nil)) }
    }

    /// How far a walk got, for the message of one that stopped.
    private static func progress(_ walk: ListingWalk) -> String {
        "after \(walk.read) of \(walk.end.map { $0 - walk.start } ?? walk.read) \(walk.kind.noun)"
    }

    /// The error that ends a walk: a change (status 8, "list again"), or a
    /// failure after some pages were printed, saying how far it got.
    private func stopped(_ error: any Error, _ walk: ListingWalk) -> any Error {
        guard let e = error as? CachedError else { return error }
        if e.code == .changed {
            return CLIError(code: .changed, message: "\(Format.visible(e.message)); what was printed may miss or repeat "
                            + "\(walk.kind.noun): list them again")
        }
        guard walk.read > 0 else { return e }
        let code: ExitCode = e.isNotRunning ? .notRunning : .failure
        return CLIError(code: code, message: "the listing stopped \(Self.progress(walk)): \(Format.visible(e.message))")
    }
}

/// The text of a listing, a page at a time: the head before the first
/// page, a line per post or row, the count after the last.
struct Table {
    let kind: ListingWalk.Kind
    /// `get images`' TYPE column: as wide as the longest type of the first
    /// page, wider for a longer one in a later page (its rows then stand out
    /// of the column: the head was printed already).
    private var typeWidth = 0
    /// `get posts`' ID and USER columns: as wide as the first page needs.
    private var columns = Format.PostColumns()
    private var started = false
    /// Rows printed that are cached.
    private var cached = 0

    init(kind: ListingWalk.Kind) { self.kind = kind }

    mutating func lines(_ page: ListingWalk.Page) -> String {
        var out = ""
        switch kind {
        case .posts:
            // The columns fit the first page (the head is printed with it).
            if !started {
                columns = columns.fitting(page.entries, ids: page.ids)
                out += Format.postsHeader(columns)
            }
            for (i, p) in page.entries.enumerated() {
                out += Format.postLine(p, id: page.ids.flatMap { i < $0.count ? $0[i] : nil }, columns)
            }
        case .images:
            typeWidth = Format.typeWidth(page.entries, atLeast: max(typeWidth, 10))
            if !started { out += Format.imagesHeader(typeWidth: typeWidth) }
            for row in page.entries {
                if Format.isCached(row) { cached += 1 }
                out += Format.imageLine(row, typeWidth: typeWidth)
            }
        }
        started = true
        return out
    }

    /// The last line: the number of posts, or of cached rows of all; for a
    /// page (`--offset`, `--limit`), where it starts and the listing's total.
    func footer(_ walk: ListingWalk, paged: Bool) -> String {
        let total = walk.total ?? 0
        let part = paged ? " from offset \(walk.start) of \(total)" : ""
        switch kind {
        case .posts:
            let n = paged ? walk.read : total
            return "\(n) post\(n == 1 ? "" : "s")\(part)"
        case .images: return "\(cached)/\(paged ? walk.read : total) rows cached\(part)"
        }
    }
}
