#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// What `scrub.state` holds, as `Store.readScrubState` found it.
public enum ScrubStateFile: Sendable, Equatable {
    /// There is none (a store never scrubbed).
    case absent
    case found(ScrubState)
    /// It could not be read, or not taken as it is: why.
    case damaged(String)
}

/// One of the store's state files as read: none, its bytes, or why not.
enum StateFileRead {
    case absent
    case bytes([UInt8])
    case damaged(String)
}

/// The scrub's side of the store: its state file (`scrub.state`, written
/// durably, never through a link) and the objects in the order a pass takes them.
extension Store {
    /// Reads `scrub.state`. Anything but a regular file that decodes (a link,
    /// a directory, a read error, a torn or edited file) is `.damaged`.
    public func readScrubState() -> ScrubStateFile {
        let name = StoreNames.scrubStateFile
        switch readStateFile(name, limit: ScrubState.maxBytes + 1) {
        case .damaged(let why): return .damaged(why)
        case .absent: return .absent
        case .bytes(let bytes):
            do throws(ScrubStateDamage) { return .found(try ScrubState(decoding: bytes)) } catch {
                return .damaged("\(directory)/\(name): \(error)")
            }
        }
    }

    /// The bytes of one of the store's small state files at its top
    /// (`scrub.state`, `feeds.state`): nil when there is none; a failure
    /// saying why for anything but a regular file read whole (a link is
    /// not followed, a FIFO never opened) or a read error.
    func readStateFile(_ name: String, limit: Int) -> StateFileRead {
        do throws(SystemError) {
            guard let status = try files.status(name) else { return .absent }
            // Never opened unless regular: opening a FIFO would block.
            guard status.isRegular else { return .damaged("\(directory)/\(name) is \(status.kind), not a regular file") }
            return .bytes(try files.read(name, limit: limit))
        } catch {
            return error.errno == ENOENT ? .absent : .damaged("\(error)")
        }
    }

    /// Replaces `scrub.state` durably: a temp file in `tmp/`, fsync, rename,
    /// fsync of the store directory. Refused once writes stopped (the store
    /// may have been replaced under the daemon).
    public func writeScrubState(_ scrub: ScrubState) throws(StoreError) {
        if let why = writesStopped { throw .writesStopped(why) }
        try writingFiles { () throws(StoreError) in
            do throws(SystemError) {
                try files.writeDurably(scrub.encoded, to: directory + "/" + StoreNames.scrubStateFile,
                                       tempDirectory: tempDirectory, mode: 0o600)
            } catch { throw .io(error) }
        }
    }

    /// The objects the index knows whose hash comes after `position` (all
    /// of them when nil), in hash order: what a pass has left to check.
    public func objectsInHashOrder(after position: Hash128?) -> [ObjectRef] {
        let refs = state.withLock { s in
            guard let position else { return Array(s.objects.values) }
            return s.objects.values.filter { $0.hash > position }
        }
        return refs.sorted { $0.hash < $1.hash }
    }
}
