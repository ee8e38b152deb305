/// A closure kept where a generic container stores it: behind a `Locked`,
/// in an `Optional`, in a property another thread replaces.
///
/// Why a class: a generic container stores a function value in its most
/// general form, and code that knows the concrete type converts it on every
/// access through a reabstraction thunk. `Locked.withLock` hands its state
/// over `inout`, so reading a bare closure back (`withLock { $0 }`) converts
/// it in and writes it back converted again: each access wraps the stored
/// closure in two more thunks, and calling it after 10,000 reads recursed
/// through 20,000 frames and overflowed a worker's stack (issue 22: the
/// daemon with HTTP on crashed after about 5,000 events). A class reference
/// has one representation in every context, so nothing is ever converted;
/// `Locked` refuses a bare closure as its state in debug builds.
public final class Handler<Argument>: Sendable {
    private let body: @Sendable (Argument) -> Void

    public init(_ body: @escaping @Sendable (Argument) -> Void) {
        self.body = body
    }

    /// Calls the closure.
    @inline(__always)
    public func callAsFunction(_ argument: Argument) {
        body(argument)
    }
}

extension Handler where Argument == Void {
    /// Calls a closure that takes nothing.
    @inline(__always)
    public func callAsFunction() {
        body(())
    }
}
