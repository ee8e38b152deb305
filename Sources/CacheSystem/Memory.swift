import CLinux

/// The process's heap, as glibc's malloc keeps it.
public enum Memory {
    /// Gives the kernel back the free pages of the heap (`malloc_trim`).
    /// After the temporaries of a large feed are freed the heap is mostly
    /// holes that glibc keeps; a 1,000,000-post refresh left about 1.2 GiB
    /// resident without this. It walks the heap under malloc's lock, so it
    /// is for after rare, large work, not for every request.
    public static func returnFreePages() {
        _ = clinux_release_free_memory()
    }

    /// Bodies at least this large are worth a `returnFreePages` once handled.
    public static let largeBody = 8 << 20
}
