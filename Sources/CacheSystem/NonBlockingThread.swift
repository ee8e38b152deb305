import CLinux

/// "The loop never blocks", checked: a thread that must not block (the
/// event loop's) marks itself, and work that may block or take long (a
/// rebuild of every row, a disk read) asserts it is not on such a thread.
/// The check traps in debug builds, which every test runs; release builds
/// keep the mark and skip the check.
public enum NonBlockingThread {
    /// Marks the calling thread as one that must never block.
    public static func markCurrent() { clinux_mark_thread_nonblocking(1) }

    /// True on a thread that marked itself.
    public static var isCurrent: Bool { clinux_thread_must_not_block() != 0 }

    /// Traps (debug builds) when called on a thread that must not block.
    @inline(__always)
    public static func assertMayBlock(_ what: @autoclosure () -> String) {
        #if DEBUG
        precondition(!isCurrent, "\(what()) on a thread that must not block (the event loop)")
        #endif
    }
}
