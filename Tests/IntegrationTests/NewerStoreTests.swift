import Foundation
import Testing
import CacheStore

/// docs/storage-format.md, "Format evolution", with the real daemon: a store
/// written by a newer cached stops the start with a message that says what
/// was found and what to do, and the log keeps every byte.
@Suite struct NewerStoreTests {
    /// A store the daemon made and left (a header-only log), then `edit`ed
    /// as a newer cached would have written it; the daemon's log after it
    /// refused to start on it.
    static func refusal(_ edit: (inout [UInt8]) -> Void) throws -> (log: String, message: String) {
        let scratch = Scratch()
        let first = try Daemon(origin: nil, scratch: scratch)
        #expect(first.stop() == 0)
        let path = first.store + "/index.log"
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(bytes == RecordCodec.header(version: 1))
        edit(&bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let daemon = try Daemon(origin: nil, scratch: scratch, waitReady: false)
        guard waitUntil(20, { !daemon.isRunning }) else {
            daemon.kill9()
            Issue.record("the daemon started on a newer store: \(daemon.log)")
            return ("", daemon.log)
        }
        #expect(daemon.waitForExit() == 1, "\(daemon.log)")
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == bytes, "index.log must keep every byte")
        let saved = try FileManager.default.contentsOfDirectory(atPath: first.store).filter { $0.hasPrefix("index.log.corrupt-") }
        #expect(saved.isEmpty, "nothing may be set aside: \(saved)")
        return (path, daemon.log)
    }

    @Test func aNewerFormatVersionStopsTheStartAndChangesNothing() throws {
        let (_, message) = try Self.refusal { $0[7] = 6 }
        #expect(message.contains("cannot open the store: store written by a newer cached: index.log format version 6, "
                                 + "this daemon reads version 5; nothing was cut or rewritten: run that newer cached "
                                 + "(or a later one) on it, or point this one at another --store"), "\(message)")
        #expect(!message.contains("damaged"), "\(message)")
    }

    @Test func anUnknownRecordTypeStopsTheStartAndChangesNothing() throws {
        let (_, message) = try Self.refusal { bytes in
            let payload: [UInt8] = [0x17, 0x01]
            let checksum = payload.withUnsafeBytes { recordChecksum($0) }
            for v in [UInt32(payload.count), checksum] {
                for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
            }
            bytes += payload + RecordCodec.encode(.commit)
        }
        #expect(message.contains("cannot open the store: store written by a newer cached: unknown record type 0x17 at offset 8 of index.log"),
                "\(message)")
    }
}
