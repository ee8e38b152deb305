import CacheSystem

extension Store {
    /// The tables' arrays made ahead on another core while the log replays
    /// (`Prefaulter`), when there is another core and the log is large
    /// enough for it to matter (8 MiB: some 270,000 records of objects,
    /// 30,000 posts; a 1,000,000-record replay gained about a tenth by it:
    /// performance.md, "Start-up"); nil otherwise, or when its thread
    /// cannot be started.
    static func prefaulter(_ files: ConfinedDirectory) -> Prefaulter? {
        guard Threads.usableCores > 1, let size = try? files.status(StoreNames.logFile)?.size,
              size >= Store.prefaultedLog else { return nil }
        return Prefaulter()
    }

    /// The smallest log whose replay is given a `Prefaulter`.
    static let prefaultedLog: Int64 = 8 << 20
}
