import CacheProtocol
import CacheService
import CacheSystem

/// The service's results as answer lines (docs/protocol.md, "Operations").
enum AnswerEncoding {
    static func ping(tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag) { o in
            o.field("version", cachedVersion)
            o.field("protocol", protocolVersion)
        }
    }

    static func posts(_ page: PostsPage, tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag, capacity: 64 + page.posts.totalBytes + 12 * page.posts.count) { o in
            o.field("total", page.total)
            o.key("ids")
            o.rawArray(page.ids.map { id in var w = JSONWriter(capacity: 24); w.postID(id); return w.bytes })
            o.key("posts")
            o.appendRaw("[".utf8)
            for i in page.posts.indices {
                if i > 0 { o.appendRaw(",".utf8) }
                page.posts.withBytes(at: i) { o.appendRaw($0) }
            }
            o.appendRaw("]".utf8)
        }
    }

    static func image(_ entry: ImageEntry, tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag) { $0.field("image", object: imageObject(entry)) }
    }

    /// Each row is written into the answer as it is made (the answer and
    /// one row in memory, not every row twice).
    static func images(_ page: ImagesPage, tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag, capacity: imagesSize(page, tag: tag)) { o in
            o.field("total", page.total)
            o.key("images")
            o.appendRaw("[".utf8)
            for (i, e) in page.images.enumerated() {
                if i > 0 { o.appendRaw(",".utf8) }
                o.appendRaw(imageObject(e).finished())
            }
            o.appendRaw("]".utf8)
        }
    }

    /// One row as `list_images` gives it, as a JSON object (without its
    /// store `path` when not `withPath`: HTTP's `/images`).
    static func imageJSON(_ e: ImageEntry, withPath: Bool = true) -> [UInt8] { imageObject(e, withPath: withPath).finished() }

    private static func imageObject(_ e: ImageEntry, withPath: Bool = true) -> JSONObjectWriter {
        var o = JSONObjectWriter()
        o.field("row", e.row)
        o.field("url", e.url)
        o.field("description", e.description)
        if let ref = e.object {
            o.field("hash", ref.hash.hex)
            o.field("size", ref.size)
            o.field("type", ref.mimeType)
            if withPath { o.field("path", ref.path) }
        } else {
            for k: StaticString in withPath ? ["hash", "size", "type", "path"] : ["hash", "size", "type"] { o.field(k, object: nil) }
        }
        o.field("last_error", object: e.lastError.map { f in
            var fo = JSONObjectWriter()
            fo.field("time", rawJSON: seconds(f.time))
            fo.field("reason", f.reason)
            if let status = f.status { fo.field("status", status) } else { fo.field("status", object: nil) }
            return fo
        })
        if let v = e.variant {
            var vo = JSONObjectWriter()
            vo.field("hash", v.object.hash.hex)
            vo.field("size", v.object.size)
            vo.field("type", v.object.mimeType)
            if withPath { vo.field("path", v.object.path) }
            vo.field("width", v.width)
            vo.field("height", v.height)
            o.field("variant", object: vo)
        }
        return o
    }

    /// Unix seconds as a JSON number, to the millisecond.
    static func seconds(_ t: Double) -> [UInt8] { Array(NumberText.fixed(t, 3).utf8) }

    /// The header line of a `read` answer; the object's bytes follow it.
    static func objectHeader(size: Int64, tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag) { $0.field("size", size) }
    }

    /// The answer line of `open`; the descriptor travels with it.
    static func opened(size: Int64, tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag) { $0.field("size", size) }
    }

    /// The answer line of `open` with `hashes`: `opened`, the descriptors
    /// that travel with it, then each object's outcome in the order asked,
    /// `{"hash","size"}` or `{"hash","error":{"code","message"}}`
    /// (docs/protocol.md, "open of many objects").
    static func opened(_ outcomes: [(hash: Hash128, result: Result<Int64, ProtocolError>)], tag: [UInt8]?) -> [UInt8] {
        let opened = outcomes.reduce(0) { n, o in if case .success = o.result { n + 1 } else { n } }
        return Response.ok(tag: tag, capacity: 32 + outcomes.count * 64) { o in
            o.field("opened", opened)
            o.key("objects")
            var first = true
            for (hash, result) in outcomes {
                var entry = JSONObjectWriter(capacity: 64)
                entry.field("hash", hash.hex)
                switch result {
                case .success(let size): entry.field("size", size)
                case .failure(let e):
                    var inner = JSONObjectWriter()
                    inner.field("code", e.code.rawValue)
                    inner.field("message", e.message)
                    entry.field("error", object: inner)
                }
                o.appendRaw(first ? "[".utf8 : ",".utf8)
                o.appendRaw(entry.finished())
                first = false
            }
            o.appendRaw("]".utf8)
        }
    }

    static func prefetch(_ r: PrefetchReport, tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag, capacity: 256) { prefetchMembers(r, &$0) }
    }

    /// The error line of a prefetch in which one feed failed
    /// (`CacheError.partialPrefetch`): `error` as any failure's, then what
    /// was done, as a success gives it, the failed feed's member null
    /// (docs/protocol.md, "prefetch").
    static func prefetchFailure(_ r: PrefetchReport, _ e: ProtocolError, tag: [UInt8]?) -> [UInt8] {
        Response.error(e, tag: tag, capacity: 256, { prefetchMembers(r, &$0) })
    }

    /// A JSON string.
    static func string(_ s: String) -> [UInt8] {
        var w = JSONWriter()
        w.string(s)
        return w.bytes
    }

    private static func prefetchMembers(_ r: PrefetchReport, _ o: inout JSONObjectWriter) {
        summary(r, into: &o)
        o.key("warnings")
        o.rawArray(r.warnings.map(string))
        o.key("failures")
        o.rawArray((r.images?.failures ?? []).map { f in
            var fo = JSONObjectWriter()
            fo.field("row", f.row)
            fo.field("url", f.url)
            fo.field("error", f.error)
            return fo.finished()
        })
    }

    /// A prefetch report's `posts` and `images` objects (the `prefetch`
    /// answer's, and `status`'s `last_prefetch.summary`).
    private static func summary(_ r: PrefetchReport, into o: inout JSONObjectWriter) {
        o.field("posts", object: r.posts.map { p in
            var po = JSONObjectWriter()
            po.field("fetched", p.fetched)
            po.field("unchanged", p.unchanged)
            po.field("removed", p.removed)
            po.field("invalid", p.invalid)
            po.field("kept", p.kept)
            return po
        })
        o.field("images", object: r.images.map { i in
            var io = JSONObjectWriter()
            io.field("downloaded", i.downloaded)
            io.field("cached", i.cached)
            io.field("revalidated", i.revalidated)
            io.field("changed", i.changed)
            io.field("unchanged", i.unchanged)
            io.field("failed", i.failed)
            io.field("skipped", i.skipped)
            io.field("transfers", i.transfers)
            io.field("bytes", i.bytes)
            return io
        })
    }

    private static func lastPrefetch(_ p: LastPrefetch) -> JSONObjectWriter {
        var o = JSONObjectWriter()
        o.field("started", rawJSON: seconds(p.started))
        o.field("finished", rawJSON: seconds(p.finished))
        o.field("succeeded", p.succeeded)
        o.field("summary", object: p.report.map { r in
            var so = JSONObjectWriter()
            summary(r, into: &so)
            return so
        })
        o.field("error", p.error)
        return o
    }

    static func progress(_ p: Progress, tag: [UInt8]?) -> [UInt8] {
        Response.progress(tag: tag, phase: p.phase, done: p.done, total: p.total, bytes: p.bytes)
    }

    static func verify(_ r: VerifyReport, tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag) { o in
            o.field("checked", r.checked)
            o.field("corrupt", JSON.array(r.corrupt.map { .string($0) }))
            o.field("repaired", r.repaired)
        }
    }

    static func garbage(_ r: GarbageReport, tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag) { o in
            o.field("removed", r.removed)
            o.field("freed_bytes", r.freedBytes)
        }
    }

    static func compaction(_ r: CompactionReport, tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag) { o in
            o.field("records_before", r.recordsBefore)
            o.field("records_after", r.recordsAfter)
        }
    }

    static func status(_ s: ServiceStatus, socket: String, tag: [UInt8]?) -> [UInt8] {
        Response.ok(tag: tag, capacity: 512) { o in
            o.field("posts", s.posts)
            o.field("images", s.images)
            o.field("images_cached", s.imagesCached)
            o.field("objects", s.objects)
            o.field("variants", s.variants)
            o.field("bytes", s.bytes)
            o.field("max_bytes", s.maxBytes)
            o.field("uptime_s", s.uptimeSeconds)
            o.field("counters", object: counters(s.counters, evictions: s.evictions))
            o.field("version", cachedVersion)
            o.field("store", s.storeDirectory)
            o.field("socket", socket)
            o.field("log_records", s.logRecords)
            o.field("last_prefetch", object: s.lastPrefetch.map(lastPrefetch))
            o.field("verify_reads", s.verifyReads)
            o.field("scrub", object: scrub(s.scrub))
            o.key("feed_warnings")
            o.rawArray(s.feedWarnings.map(Self.string))
        }
    }

    private static func counters(_ c: CounterValues, evictions: Int) -> JSONObjectWriter {
        var co = JSONObjectWriter()
        co.field("hits", c.hits)
        co.field("misses", c.misses)
        co.field("downloads", c.downloads)
        co.field("download_bytes", c.downloadBytes)
        co.field("coalesced", c.coalesced)
        co.field("errors", c.errors)
        co.field("requests", c.requests)
        co.field("connections", c.connections)
        co.field("upstream_errors", c.upstreamErrors)
        co.field("quarantined", c.quarantined)
        co.field("read_errors", c.readErrors)
        co.field("evictions", evictions)
        co.field("variants_made", c.variantsMade)
        co.field("variant_hits", c.variantHits)
        co.field("variant_failures", c.variantFailures)
        co.field("variant_jobs", c.variantJobs)
        return co
    }
}

extension JSONObjectWriter {
    /// A JSON array of already-encoded values, in place, as the current member.
    mutating func rawArray(_ items: [[UInt8]]) {
        appendRaw("[".utf8)
        for (i, item) in items.enumerated() {
            if i > 0 { appendRaw(",".utf8) }
            appendRaw(item)
        }
        appendRaw("]".utf8)
    }
}
