#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Threads without Foundation.
public enum Threads {
    private final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Starts a detached thread named `name` (at most 15 bytes are kept).
    public static func start(name: String, stackSize: Int = 1 << 20, _ body: @escaping @Sendable () -> Void) {
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        pthread_attr_setstacksize(&attr, stackSize)
        let box = Unmanaged.passRetained(Box { 
            setName(name)
            body()
        }).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, &attr, { arg in
            let b = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
            b.body()
            return nil
        }, box)
        pthread_attr_destroy(&attr)
        if rc != 0 {
            // No thread: run nothing, but do not leak the closure.
            Unmanaged<Box>.fromOpaque(box).release()
        }
    }

    private static func setName(_ name: String) {
        clinux_set_thread_name(String(decoding: name.utf8.prefix(15), as: UTF8.self))
    }
}
