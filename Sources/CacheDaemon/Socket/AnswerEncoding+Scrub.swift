import CacheProtocol
import CacheService

/// `status`'s `scrub` member (docs/protocol.md, `status`).
extension AnswerEncoding {
    static func scrub(_ s: ScrubStatus) -> JSONObjectWriter {
        var o = JSONObjectWriter()
        o.field("state", s.state.rawValue)
        o.field("interval_s", s.interval.wholeSeconds)
        o.field("rate", s.rate)
        o.field("pass", object: s.pass.map { p in
            var po = JSONObjectWriter()
            po.field("started", p.started)
            po.field("position", p.position)
            po.field("objects", p.objects)
            po.field("bytes", p.bytes)
            po.field("checked", object: counts(p.checked))
            return po
        })
        o.field("last", object: s.last.map { l in
            var lo = JSONObjectWriter()
            lo.field("started", l.started)
            lo.field("ended", l.ended)
            lo.field("checked", object: counts(l.checked))
            return lo
        })
        if let next = s.nextStart { o.field("next_start", next) } else { o.field("next_start", object: nil) }
        o.field("since_start", object: counts(s.sinceStart))
        return o
    }

    private static func counts(_ c: ScrubStatus.Counts) -> JSONObjectWriter {
        var o = JSONObjectWriter()
        o.field("objects", c.objects)
        o.field("bytes", c.bytes)
        o.field("corrupt", c.corrupt)
        o.field("unreadable", c.unreadable)
        o.field("missing", c.missing)
        return o
    }
}
