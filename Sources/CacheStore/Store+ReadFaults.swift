#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// What became of an object's file that could not be read or failed verification.
public enum QuarantineOutcome: Sendable, Equatable, CustomStringConvertible {
    /// Renamed to this path in `quarantine/`.
    case moved(String)
    /// It could not be renamed: unlinked.
    case unlinked
    /// It could be neither renamed nor unlinked (a file system gone
    /// read-only): left where it is, and forgotten all the same.
    case kept(SystemError)
    /// A download of the same bytes is replacing it (the damaged file is
    /// linked into `quarantine/` first).
    case replaced
    /// Another request had set it aside (or it was replaced) already:
    /// nothing done, nothing to count or log again.
    case handledAlready

    public var description: String {
        switch self {
        case .moved(let to): "moved to \(to)"
        case .unlinked: "it could not be moved to quarantine/ and was removed"
        case .kept(let e): "it could be neither moved to quarantine/ nor removed (\(e)); the index forgets it"
        case .replaced: "a download of the same bytes replaces it"
        case .handledAlready: "already set aside by another request"
        }
    }
}

/// An object file set aside, as the store reports it once
/// (`StoreConfiguration.onSetAside`).
public struct SetAside: Sendable {
    public var hash: Hash128
    /// The rows that named the object.
    public var rows: [Int]
    /// `corruptObject` or `unreadableObject`: its description names the
    /// file, and for a read error the errno.
    public var error: StoreError
    /// True when the object is wanted again (download it from a row); false
    /// when a commit of the same bytes is replacing it already.
    public var repair: Bool
    /// The variants the object was (make them again: no row names it).
    public var variants: [VariantKey] = []
}

/// Why an object's file is set aside.
enum FileFault {
    /// Its bytes do not hash to its name.
    case mismatch
    /// Reading (or opening) it failed.
    case unreadable(SystemError)
}

/// Read faults (docs/operations.md, "Verified reads and disk faults"): a
/// file that fails is set aside and forgotten once, reported once
/// (`onSetAside`) and counted; and the trust of `verify-reads = on-change`
/// (`TrustedFiles`).
extension Store {
    /// Object read errors met so far (each once per object file).
    public var readErrors: Int { readErrorCount.withLock { $0 } }

    /// The error for object `hash`, whose file gave `error` when read (or
    /// opened): set aside (`setAsideFile`) unless another request did first.
    func unreadable(_ hash: Hash128, _ error: SystemError, file: FileIdentity?) -> StoreError {
        setAsideFile(hash, file: file, .unreadable(error))
    }

    /// A read error met outside the store (the event loop's `sendfile` of
    /// an object file), reported with the file's identity taken before its
    /// descriptor was closed: handled as `openVerified` handles one. Nil
    /// when `path` is not one of this store's object files.
    public func readFailed(path: String, file: FileIdentity?, _ error: SystemError) -> StoreError? {
        guard let hash = objectHash(ofPath: path) else { return nil }
        return unreadable(hash, error, file: file)
    }

    /// The hash an object file's path names (`objects/ab/<30 hex digits>`,
    /// relative or under this store's directory), or nil.
    func objectHash(ofPath path: String) -> Hash128? {
        var relative = Substring(path)
        if relative.hasPrefix(directory + "/") { relative = relative.dropFirst(directory.count + 1) }
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "objects", parts[1].count == 2, parts[2].count == 30,
              let hash = Hash128(hex: parts[1] + parts[2]), Self.objectRelativePath(hash) == String(relative) else { return nil }
        return hash
    }

    /// Sets aside the file of object `hash` for `fault`, under the writer
    /// lock: renamed to `quarantine/` (or unlinked, or when even that fails
    /// kept), reported once (`onSetAside`, before the index forgets it, so
    /// that a repair is under way before any request can find the object
    /// gone), counted, and forgotten in the log. Only while the index still
    /// knows the object, and (given `file`) only while its name still holds
    /// that very file, identity and all: a file a repair has put there
    /// since is left alone (`handledAlready`). Returns the error to answer.
    func setAsideFile(_ hash: Hash128, file: FileIdentity?, _ fault: FileFault) -> StoreError {
        let path = objectPath(hash)
        return writer.withLock { w -> StoreError in
            let known = state.withLock { $0.objects[hash] != nil }
            if !known || (file != nil && !nameHolds(file, path)) { return faultError(hash, path, fault, .handledAlready, rows: []) }
            let rows = rowsReferencing(hash)
            let variants = state.withLock { s in s.variants.filter { $0.value.object.hash == hash }.map(\.key).sorted() }
            let outcome = moveAside(path, hash)
            let error = faultError(hash, path, fault, outcome, rows: rows)
            if case .unreadable = fault { readErrorCount.withLock { $0 += 1 } }
            configuration.onSetAside?(SetAside(hash: hash, rows: rows, error: error, repair: true, variants: variants))
            // Forgotten in memory even when the log cannot be appended (a full
            // or failing disk): the file is gone, and the next start drops the
            // object as missing (`dropMissingObjects`).
            do throws(StoreError) { try append([.objectRemoved(hash: hash)], &w) } catch {
                configuration.onWarning?("could not log that object \(hash) was set aside (\(error)); "
                    + "it is forgotten now, and dropped as missing at the next start")
            }
            state.withLock { $0.apply(.objectRemoved(hash: hash)) }
            forgetCached([hash])
            return error
        }
    }

    /// True when `path` (never followed) is still the file `file` is; false
    /// when it is another, or none. One that cannot be examined is reported
    /// (`onWarning`) and taken as another: left alone, never set aside blind.
    private func nameHolds(_ file: FileIdentity?, _ path: String) -> Bool {
        do throws(SystemError) { return try files.identity(path) == file } catch {
            configuration.onWarning?("could not examine \(path) to set it aside (\(error)); it is left as it is")
            return false
        }
    }

    /// `corruptObject` or `unreadableObject`, as `fault` says.
    private func faultError(_ hash: Hash128, _ path: String, _ fault: FileFault, _ outcome: QuarantineOutcome, rows: [Int]) -> StoreError {
        switch fault {
        case .mismatch:
            if case .moved(let to) = outcome { return .corruptObject(hash, quarantinedTo: to, rows: rows) }
            return .corruptObject(hash, quarantinedTo: nil, rows: rows)
        case .unreadable(let e):
            return .unreadableObject(hash, path: path, e, outcome, rows: rows)
        }
    }

    /// The file of object `hash`, which a commit of the same bytes is about
    /// to replace, could not be read: counted and reported (no repair: the
    /// commit is one).
    func noteReplacedUnreadable(_ hash: Hash128, _ error: SystemError) {
        readErrorCount.withLock { $0 += 1 }
        let failure = StoreError.unreadableObject(hash, path: objectPath(hash), error, .replaced, rows: [])
        configuration.onSetAside?(SetAside(hash: hash, rows: [], error: failure, repair: false))
    }

    /// Renames `path` into quarantine/, or unlinks it when it cannot be renamed.
    private func moveAside(_ path: String, _ hash: Hash128) -> QuarantineOutcome {
        let target = quarantineName(hash)
        do throws(SystemError) {
            try files.rename(path, target)
        } catch {
            if error.errno == ENOENT { return .handledAlready }
            do throws(SystemError) { try files.unlink(path) } catch { return .kept(error) }
            return .unlinked
        }
        do throws(SystemError) { try files.syncDirectory(quarantineDirectory) } catch {
            // The rename may not survive a power loss: the file would be back
            // under its name, where the next read or scrub finds it again.
            configuration.onWarning?("could not sync \(quarantineDirectory) after moving \(path) there (\(error))")
        }
        return .moved(target)
    }

    /// Forgets an object whose file was found missing, under the writer
    /// lock and only if it still is (a repair may have put it back since)
    /// and no commit of it is in flight.
    func forgetIfFileGone(_ hash: Hash128) {
        let path = objectPath(hash)
        do throws(StoreError) {
            try writer.withLock { (w) throws(StoreError) in
                guard state.withLock({ $0.objects[hash] != nil }), pendingObjects.withLock({ $0[hash] == nil }) else { return }
                // Gone for certain: a name that cannot be examined is not forgotten
                // (the caller's missingObject stands; the next open tries again).
                guard (try? files.identity(path)) == .some(nil) else { return }
                try append([.objectRemoved(hash: hash)], &w)
                state.withLock { $0.apply(.objectRemoved(hash: hash)) }
                forgetCached([hash])
            }
        } catch {
            configuration.onWarning?("could not log that object \(hash)'s file is gone (\(error)); the index still names it")
        }
    }

    /// A name in quarantine/ no other quarantined file has.
    func quarantineName(_ hash: Hash128) -> String {
        "\(quarantineDirectory)/\(hash.hex)-\(Clock.wallSeconds())-\(TempName.next(""))"
    }

    /// Sets an object's file aside as one whose bytes do not match
    /// (`setAsideFile`, whatever file is there now); returns where it went.
    @discardableResult
    public func quarantine(_ hash: Hash128) -> String? {
        if case .corruptObject(_, let to, _) = setAsideFile(hash, file: nil, .mismatch) { return to }
        return nil
    }

    // MARK: on-change trust

    /// True when the mode is `on-change`, `fd` (object `hash`'s file) has
    /// the identity it had when its bytes were last hashed or written, and
    /// (with `checkCache`) all its pages are in the page cache.
    func trustsUnchanged(_ hash: Hash128, _ fd: FileDescriptor, _ known: FileIdentity?, checkCache: Bool = true) -> Bool {
        guard readVerification.mode == .onChange else { return false }
        guard let identity = known ?? Self.identity(of: fd) else { return false }
        guard trusted.withLock({ $0.trusts(hash, identity) }) else { return false }
        return !checkCache || fd.isCached(length: identity.size)
    }

    /// Records that `fd`, with `identity` taken before its bytes were
    /// hashed and found to match, holds object `hash` (`on-change` only;
    /// never a NOCOW file where the mode rests on btrfs's checksums).
    func trustIfChecked(_ hash: Hash128, _ fd: FileDescriptor, _ identity: FileIdentity) {
        guard readVerification.mode == .onChange else { return }
        if readVerification.fileSystemChecksums && fd.isNoCopyOnWrite { return }
        trusted.withLock { $0.trust(hash, identity) }
    }

    /// After a commit: the file now named `path` holds `hash`'s bytes (they
    /// were hashed as they were written), so it is trusted as it is now.
    func trustCommitted(_ hash: Hash128, _ path: String) {
        // Not opened: not trusted, so the next read hashes the file, as under `always`.
        guard readVerification.mode == .onChange, let fd = try? files.open(path, .readOnly) else { return }
        defer { fd.close() }
        if let identity = Self.identity(of: fd) { trustIfChecked(hash, fd, identity) }
    }

    /// The identity of the file behind `fd`, or nil: `fstat` of an open
    /// descriptor fails only on an I/O error, and an unknown identity is
    /// never trusted (the file is hashed) nor matched (setting aside acts
    /// on whatever file holds the name then).
    static func identity(of fd: FileDescriptor) -> FileIdentity? { try? fd.identity() }

    /// The object's file opened with nothing read, when it is trusted and
    /// (unless `cachedOrNot`) wholly in the page cache (`on-change`); nil otherwise.
    public func openTrustedIfCached(_ hash: Hash128, cachedOrNot: Bool = false) -> (FileDescriptor, Int64)? {
        // Not opened: nil, the slow path (`openVerified`), which meets and handles the error itself.
        guard readVerification.mode == .onChange, objectRef(hash) != nil,
              let fd = try? files.open(Self.objectRelativePath(hash), .readOnly) else { return nil }
        guard let identity = Self.identity(of: fd), trustsUnchanged(hash, fd, identity, checkCache: !cachedOrNot) else {
            fd.close()
            return nil
        }
        touch(hash)
        return (fd, identity.size)
    }

    /// Drops what is kept in memory of objects the index no longer holds:
    /// their trust and their bytes.
    func forgetCached(_ hashes: Set<Hash128>) {
        guard !hashes.isEmpty else { return }
        if readVerification.mode == .onChange { trusted.withLock { $0.forget(hashes) } }
        smallObjects.withLock { $0.remove(hashes) }
    }
}
