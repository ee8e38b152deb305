extension Settings {
    /// What a reload from `self` (running) to `fresh` does, per the table.
    struct ReloadPlan: Sendable {
        /// Settings that take effect now, as "key old -> new".
        var changes: [String] = []
        /// Settings that differ but need a restart (their running values stay).
        var needRestart: [String] = []
        /// The settings to run with: `fresh`, except what needs a restart.
        var applied: Settings
    }

    func reloadPlan(to fresh: Settings) -> ReloadPlan {
        var plan = ReloadPlan(applied: fresh)
        for spec in Settings.table {
            let old = spec.show(self), new = spec.show(fresh)
            guard spec.differs?(self, fresh) ?? (old != new) else { continue }
            switch spec.reload {
            case .live: plan.changes.append("\(spec.name) \(old) -> \(new)")
            case .restart:
                plan.needRestart.append(spec.name)
                spec.copy(&plan.applied, self)
            }
        }
        return plan
    }
}
