#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// What became of an object's file that could not be read or failed verification.
public enum QuarantineOutcome: Sendable, Equatable, CustomStringConvertible {
    /// Renamed to this path in `quarantine/`.
    case moved(String)
    /// It could not even be renamed: unlinked.
    case unlinked
    /// Another request had quarantined it (or it was replaced) already:
    /// nothing done, nothing to count again.
    case handledAlready

    public var description: String {
        switch self {
        case .moved(let to): "moved to \(to)"
        case .unlinked: "it could not be moved to quarantine/ and was removed"
        case .handledAlready: "already set aside by another request"
        }
    }
}

/// Read faults (docs/operations.md, "Disk faults"): a read error is the
/// file's fault, it is set aside and forgotten, and counted; and the trust
/// of `verify-reads = on-change` (`TrustedFiles`).
extension Store {
    /// Object read errors met so far (every one counted once per object file).
    public var readErrors: Int { readErrorCount.withLock { $0 } }

    func noteReadError(_ error: SystemError) {
        readErrorCount.withLock { $0 += 1 }
    }

    /// The error for object `hash`, whose file gave `error` when read (or
    /// opened): its file is quarantined (`quarantineUnreadable`) and the
    /// error is counted, unless another request did both first.
    func unreadable(_ hash: Hash128, _ error: SystemError, file: FileIdentity?) -> StoreError {
        let rows = rowsReferencing(hash)
        let outcome = quarantineUnreadable(hash, file: file)
        if outcome != .handledAlready { noteReadError(error) }
        return .unreadableObject(hash, path: objectPath(hash), error, outcome, rows: rows)
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

    /// Sets aside the file of an object that could not be read: renamed
    /// to `quarantine/` (or, when even that fails, unlinked) and forgotten
    /// in the log, under the writer lock. Only while the index still knows
    /// the object, and (given `file`) only while its name still holds that
    /// very file: a file a repair has put there since is left alone.
    func quarantineUnreadable(_ hash: Hash128, file: FileIdentity?) -> QuarantineOutcome {
        let path = objectPath(hash)
        return writer.withLock { w -> QuarantineOutcome in
            guard state.withLock({ $0.objects[hash] != nil }) else { return .handledAlready }
            if let file, let now = try? files.status(path), now.device != file.device || now.inode != file.inode {
                return .handledAlready
            }
            let outcome = setAside(path, hash)
            // Forgotten in memory even when the log cannot be appended (a full
            // or failing disk): the file is gone, and the next start drops the
            // object as missing (`dropMissingObjects`).
            try? append([.objectRemoved(hash: hash)], &w)
            state.withLock { $0.apply(.objectRemoved(hash: hash)) }
            trusted.withLock { $0.forget(hash) }
            return outcome
        }
    }

    /// Renames `path` into quarantine/, or unlinks it when it cannot be renamed.
    private func setAside(_ path: String, _ hash: Hash128) -> QuarantineOutcome {
        let target = quarantineName(hash)
        do throws(SystemError) {
            try files.rename(path, target)
            try? files.syncDirectory(quarantineDirectory)
            return .moved(target)
        } catch {
            if error.errno == ENOENT { return .handledAlready }
            do throws(SystemError) { try files.unlink(path) } catch { return .handledAlready }
            return .unlinked
        }
    }

    /// A name in quarantine/ no other quarantined file has.
    func quarantineName(_ hash: Hash128) -> String {
        "\(quarantineDirectory)/\(hash.hex)-\(Clock.wallSeconds())-\(TempName.next(""))"
    }

    /// Moves an object's file to `quarantine/` and forgets it; returns where it went.
    @discardableResult
    public func quarantine(_ hash: Hash128) -> String? {
        let target = quarantineName(hash)
        let moved: String?
        do throws(SystemError) {
            try files.rename(objectPath(hash), target)
            try files.syncDirectory(quarantineDirectory)
            moved = target
        } catch { moved = nil }
        try? forgetObject(hash)
        return moved
    }

    // MARK: on-change trust

    /// True when the mode is `on-change`, `fd` (object `hash`'s file) has
    /// the identity it had when its bytes were last hashed or written, and
    /// (with `checkCache`) all its pages are in the page cache.
    func trustsUnchanged(_ hash: Hash128, _ fd: FileDescriptor, _ known: FileIdentity?, checkCache: Bool = true) -> Bool {
        guard readVerification.mode == .onChange else { return false }
        guard let identity = known ?? (try? fd.identity()) else { return false }
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
        guard readVerification.mode == .onChange, let fd = try? files.open(path, O_RDONLY) else { return }
        defer { fd.close() }
        if let identity = try? fd.identity() { trustIfChecked(hash, fd, identity) }
    }

    /// The object's file opened with nothing read, when it is trusted and
    /// wholly in the page cache (`on-change`); nil otherwise.
    public func openTrustedIfCached(_ hash: Hash128) -> (FileDescriptor, Int64)? {
        guard readVerification.mode == .onChange, objectRef(hash) != nil,
              let fd = try? files.open(Self.objectRelativePath(hash), O_RDONLY) else { return nil }
        guard let identity = try? fd.identity(), trustsUnchanged(hash, fd, identity) else {
            fd.close()
            return nil
        }
        touch(hash)
        return (fd, identity.size)
    }

    /// Drops the trust of objects the index no longer holds.
    func distrust(_ hashes: Set<Hash128>) {
        guard readVerification.mode == .onChange, !hashes.isEmpty else { return }
        trusted.withLock { $0.forget(hashes) }
    }
}
