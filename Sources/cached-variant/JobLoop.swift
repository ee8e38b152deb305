#if canImport(Glibc)
import Glibc
#endif
import CacheSystem
import CacheVariant
import CVipsShim

/// The jobs' loop on standard input and output (VariantWire), inside the sandbox.
enum JobLoop {
    /// The largest source a helper reads into memory.
    static let maxSource: Int64 = 2 << 30

    /// Says it is ready, then answers jobs until standard input ends (exit
    /// 0). A broken header exits with status 2 and a message on standard
    /// error: the stream cannot be trusted after it.
    static func serve() -> Never {
        HelperIO.writeAll(1, VariantWire.ready)
        while true {
            guard let job = readJob() else { _exit(0) }
            guard job.sourceLength <= maxSource else {
                skip(job.sourceLength)
                answer(status: .refused, message: "the source is \(job.sourceLength) bytes, over the \(maxSource) bytes a helper takes")
                continue
            }
            // malloc, not a Swift array: under RLIMIT_AS a source that does
            // not fit is a failed job, not a crash.
            let count = Int(job.sourceLength)
            guard let source = malloc(max(count, 1))?.bindMemory(to: UInt8.self, capacity: max(count, 1)) else {
                skip(job.sourceLength)
                answer(status: .failed, message: "out of memory: a source of \(count) bytes does not fit in the helper's address space")
                continue
            }
            readSource(into: UnsafeMutableBufferPointer(start: source, count: count))
            var result = cvs_result()
            var spec = cvs_job(format: job.format.rawValue, fit: job.fit.rawValue,
                               width: UInt32(clamping: job.width ?? 0), height: UInt32(clamping: job.height ?? 0),
                               max_dimension: UInt32(clamping: job.maxDimension),
                               max_pixels: UInt64(clamping: job.maxPixels), max_result: UInt64(clamping: job.maxResult))
            cvs_make_variant(source, count, &spec, &result)
            free(source)
            answer(result)
            cvs_result_free(&result)
        }
    }

    /// The next job's header; nil when the input ends before its first byte.
    private static func readJob() -> VariantWire.Job? {
        var header = [UInt8](repeating: 0, count: VariantWire.jobHeaderSize)
        let got = header.withUnsafeMutableBytes { HelperIO.readFully(0, into: $0) }
        if got == 0 { return nil }
        guard got == header.count else {
            HelperIO.die("the input ends inside a job header (\(got) of \(header.count) bytes)", status: 2)
        }
        switch VariantWire.Job.decode(header) {
        case .success(let job):
            guard job.sourceLength >= 0 else { HelperIO.die("a job's source length is negative", status: 2) }
            return job
        case .failure(let error):
            HelperIO.die("broken job header: \(error)", status: 2)
        }
    }

    /// Fills `buffer` with the source. Exits with status 2 when the input ends first.
    private static func readSource(into buffer: UnsafeMutableBufferPointer<UInt8>) {
        let got = HelperIO.readFully(0, into: UnsafeMutableRawBufferPointer(buffer))
        guard got == buffer.count else { HelperIO.die("the input ends inside a source (\(got) of \(buffer.count) bytes)", status: 2) }
    }

    /// Reads and drops `count` bytes: a refused source, so the next job's
    /// header is read where it starts.
    private static func skip(_ count: Int64) {
        var left = count
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while left > 0 {
            let want = Int(min(left, Int64(chunk.count)))
            let got = chunk.withUnsafeMutableBytes { HelperIO.readFully(0, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want])) }
            guard got == want else { HelperIO.die("the input ends inside a source", status: 2) }
            left -= Int64(got)
        }
    }

    /// Writes a result: its header, then its bytes.
    private static func answer(_ result: cvs_result) {
        let status = VariantWire.ResultHeader.Status(rawValue: result.status) ?? .failed
        let header = VariantWire.ResultHeader(status: status, width: Int(result.width), height: Int(result.height),
                                              length: Int64(result.length))
        HelperIO.writeAll(1, header.encoded)
        if result.length > 0 { HelperIO.writeAll(1, UnsafeRawBufferPointer(start: result.bytes, count: result.length)) }
    }

    /// Writes a message result of `status`, cut to `VariantWire.maxMessage` bytes.
    private static func answer(status: VariantWire.ResultHeader.Status, message: String) {
        let bytes = Array(message.utf8.prefix(VariantWire.maxMessage))
        HelperIO.writeAll(1, VariantWire.ResultHeader(status: status, width: 0, height: 0, length: Int64(bytes.count)).encoded)
        HelperIO.writeAll(1, bytes)
    }
}
