import CacheProtocol
import CacheStore
import CacheSystem

/// The daemon's version, reported by `ping` and `--version`.
public let cachedVersion = "0.1.0"

/// Turns each request into its answer: from memory on the loop thread when
/// the answer is at hand, through the service (worker and fetch threads) when
/// it needs the disk or the origin.
final class Dispatcher: Sendable {
    let service: CacheService
    let started = Clock.monotonicNanoseconds()
    let socketPath: String

    init(service: CacheService, socketPath: String) {
        self.service = service
        self.socketPath = socketPath
    }

    private var store: Store { service.store }

    func handle(_ request: Request, _ reply: Reply) -> Answer {
        let tag = request.tag
        switch request.command {
        case .ping:
            return .now(Response.ok(tag: tag) { o in
                o.field("version", cachedVersion)
                o.field("protocol", protocolVersion)
            })

        case .status:
            return .now(status(tag: tag))

        case .getPost(let id):
            guard let json = store.post(id: id) else {
                let hint = store.postsKnown ? "" : " (posts were never fetched: run cachectl prefetch posts)"
                return .now(fail(.notFound, "post \(id) not found\(hint)", tag))
            }
            return .now(Response.ok(tag: tag, name: "post", rawJSON: json))

        case let .listPosts(offset, limit):
            let (total, page) = store.posts(offset: offset, limit: limit ?? Int.max)
            return .now(Response.ok(tag: tag, capacity: page.reduce(64) { $0 + $1.count + 1 }) { o in
                o.field("total", total)
                o.key("posts")
                o.raw("[")
                for (i, p) in page.enumerated() {
                    if i > 0 { o.raw(",") }
                    o.raw(p)
                }
                o.raw("]")
            })

        case let .getImage(row, fetch):
            // The common case, a cached row, is answered right here.
            if store.manifestKnown, let r = store.row(row), let ref = r.object, store.objectFileLooksRight(ref) {
                service.counters.withLock { $0.hits += 1 }
                store.touch(ref.hash)
                return .now(Response.ok(tag: tag) { $0.field("image", object: imageObject(row, r, ref)) })
            }
            // A miss may write the log or the disk: never on the loop thread.
            service.pool.submit { [self] in
                service.image(row: row, fetch: fetch) { [self] result in
                    switch result {
                    case .success(let (r, ref)):
                        reply.finish(Response.ok(tag: tag) { $0.field("image", object: imageObject(row, r, ref)) })
                    case .failure(let e):
                        reply.finish(fail(e.code, e.message, tag))
                    }
                }
            }
            return .later

        case let .listImages(offset, limit):
            if store.manifestKnown { return .now(listImages(offset: offset, limit: limit, tag: tag)) }
            service.ensureManifest { [self] result in
                switch result {
                case .success: reply.finish(listImages(offset: offset, limit: limit, tag: tag))
                case .failure(let e): reply.finish(fail(e.code, e.message, tag))
                }
            }
            return .later

        case .read(let hex):
            guard let hash = Hash128(hex: hex) else { return .now(fail(.badRequest, "\"hash\" must be 32 lowercase hex digits", tag)) }
            // Small objects whose bytes are in the page cache are verified and
            // sent right here (nothing can block); the rest go to a worker.
            if let answer = store.readVerifiedIfCached(hash, upTo: 256 * 1024, header: { size in
                Response.ok(tag: tag) { $0.field("size", size) }
            }) {
                return .now(answer)
            }
            service.pool.submit { [self] in read(hash, reply: reply, retry: true) }
            return .later

        case let .prefetch(what, force, progress):
            service.prefetch(what: what, force: force, progress: { p in
                if progress { reply.send(Response.progress(tag: tag, phase: p.phase, done: p.done, total: p.total, bytes: p.bytes)) }
            }, completion: { [self] result in
                switch result {
                case .success(let (posts, images)):
                    reply.finish(Response.ok(tag: tag, capacity: 256) { o in
                        o.field("posts", object: posts.map { p in
                            var po = JSONObjectWriter()
                            po.field("fetched", p.fetched)
                            po.field("unchanged", p.unchanged)
                            po.field("removed", p.removed)
                            po.field("invalid", p.invalid)
                            return po
                        })
                        o.field("images", object: images.map { i in
                            var io = JSONObjectWriter()
                            io.field("downloaded", i.downloaded)
                            io.field("cached", i.cached)
                            io.field("failed", i.failed)
                            io.field("bytes", i.bytes)
                            return io
                        })
                        o.key("failures")
                        o.raw("[")
                        for (n, f) in (images?.failures ?? []).enumerated() {
                            if n > 0 { o.raw(",") }
                            var fo = JSONObjectWriter()
                            fo.field("row", f.row)
                            fo.field("url", f.url)
                            fo.field("error", f.error)
                            o.raw(fo.finished())
                        }
                        o.raw("]")
                    })
                case .failure(let e):
                    reply.finish(fail(e.code, e.message, tag))
                }
            })
            return .later

        case .verify:
            service.verify { checked, corrupt, repaired in
                reply.finish(Response.ok(tag: tag) { o in
                    o.field("checked", checked)
                    o.field("corrupt", JSON.array(corrupt.map { .string($0.hex) }))
                    o.field("repaired", repaired)
                })
            }
            return .later

        case .gc:
            return onPool(reply, failing: "gc") { [self] () throws(StoreError) in
                let (removed, freed) = try store.collectGarbage()
                service.log.info("gc removed \(removed) files, \(freed) bytes")
                return Response.ok(tag: tag) { o in
                    o.field("removed", removed)
                    o.field("freed_bytes", freed)
                }
            }

        case .compact:
            return onPool(reply, failing: "compact") { [self] () throws(StoreError) in
                let (before, after) = try store.compact()
                let (removed, freed) = try store.collectGarbage()
                service.log.info("compacted the log from \(before) to \(after) records; gc removed \(removed) files, \(freed) bytes")
                return Response.ok(tag: tag) { o in
                    o.field("records_before", before)
                    o.field("records_after", after)
                }
            }
        }
    }

    /// Runs store maintenance on a worker and answers with its line, or with
    /// an `internal` error naming the operation.
    private func onPool(_ reply: Reply, failing what: String,
                        _ work: @escaping @Sendable () throws(StoreError) -> [UInt8]) -> Answer {
        service.pool.submit { [self] in
            do throws(StoreError) { reply.finish(try work()) } catch {
                reply.finish(fail(.internal, "\(what) failed: \(error)", reply.tag))
            }
        }
        return .later
    }

    /// An error line, counted.
    private func fail(_ code: ErrorCode, _ message: String, _ tag: [UInt8]?) -> [UInt8] {
        service.counters.withLock { $0.errors += 1 }
        return Response.error(ProtocolError(code, message), tag: tag)
    }

    private func imageObject(_ index: Int, _ row: Row, _ ref: ObjectRef?) -> JSONObjectWriter {
        var o = JSONObjectWriter()
        o.field("row", index)
        o.field("url", service.resolvedURL(at: index) ?? row.url)
        o.field("description", row.description)
        if let ref {
            o.field("hash", ref.hash.hex)
            o.field("size", ref.size)
            o.field("type", ref.type.mimeType)
            o.field("path", store.objectPath(ref.hash))
        } else {
            for k: StaticString in ["hash", "size", "type", "path"] { o.field(k, object: nil) }
        }
        return o
    }

    private func listImages(offset: Int, limit: Int?, tag: [UInt8]?) -> [UInt8] {
        let (total, page) = store.rows(offset: offset, limit: limit ?? Int.max)
        return Response.ok(tag: tag, capacity: page.count * 200 + 64) { o in
            o.field("total", total)
            o.key("images")
            o.raw("[")
            for (i, r) in page.enumerated() {
                if i > 0 { o.raw(",") }
                o.raw(imageObject(offset + i, r, r.object).finished())
            }
            o.raw("]")
        }
    }

    /// Sends a verified object. A corrupt object is quarantined; when a row
    /// still names its URL it is downloaded again and, if the bytes match the
    /// hash asked for, served.
    private func read(_ hash: Hash128, reply: Reply, retry: Bool) {
        guard store.objectRef(hash) != nil else {
            reply.finish(fail(.notFound, "object \(hash.hex) is not in the store", reply.tag))
            return
        }
        do throws(StoreError) {
            let (fd, size) = try store.openVerified(hash)
            reply.finish(header: Response.ok(tag: reply.tag) { $0.field("size", size) }, file: fd, size: size)
        } catch {
            service.log.warning("read: \(error)")
            guard case .corruptObject(_, _, let rows) = error else {
                reply.finish(fail(error.isMissing ? .notFound : .internal, "\(error)", reply.tag))
                return
            }
            service.counters.withLock { $0.quarantined += 1 }
            guard retry, let url = rows.lazy.compactMap({ self.service.resolvedURL(at: $0) }).first else {
                reply.finish(fail(.notFound, "\(error); no row refers to it any more", reply.tag))
                return
            }
            service.download(url: url) { [self] result in
                if case .success(let ref) = result, ref.hash == hash {
                    read(hash, reply: reply, retry: false)
                } else {
                    reply.finish(fail(.notFound, "\(error); downloading it again from \(url) did not give the same bytes", reply.tag))
                }
            }
        }
    }

    private func status(tag: [UInt8]?) -> [UInt8] {
        let s = store.stats()
        let c = service.counters.withLock { $0 }
        let maxBytes = service.settings.withLock { $0.maxSize }
        return Response.ok(tag: tag, capacity: 512) { o in
            o.field("posts", s.posts)
            o.field("images", s.rows)
            o.field("images_cached", s.rowsCached)
            o.field("objects", s.objects)
            o.field("bytes", s.bytes)
            o.field("max_bytes", maxBytes)
            o.field("uptime_s", (Clock.monotonicNanoseconds() - started) / 1_000_000_000)
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
            co.field("evictions", s.evictions)
            o.field("counters", object: co)
            o.field("version", cachedVersion)
            o.field("store", store.directory)
            o.field("socket", socketPath)
            o.field("log_records", s.logRecords)
        }
    }
}

extension StoreError {
    var isMissing: Bool { if case .missingObject = self { return true } else { return false } }
}

extension JSONObjectWriter {
    /// Raw text inside the current member (used to build arrays in place).
    mutating func raw(_ s: StaticString) { appendRaw(Array(UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))) }
    mutating func raw(_ b: [UInt8]) { appendRaw(b) }
}
