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

    /// Starts a detached thread named `name` (at most 15 bytes are kept);
    /// throws, running nothing, when the thread cannot be created
    /// (`pthread_create`'s EAGAIN: the process or user is out of threads).
    public static func start(name: String, stackSize: Int = 1 << 20, _ body: @escaping @Sendable () -> Void) throws(SystemError) {
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
            throw SystemError("pthread_create", name, errno: rc)
        }
    }

    private static func setName(_ name: String) {
        clinux_set_thread_name(String(decoding: name.utf8.prefix(15), as: UTF8.self))
    }
}

extension Threads {
    /// The cores this process may run on: its affinity mask (`taskset`,
    /// a systemd `CPUAffinity=`), else the online ones; at least 1.
    public static var usableCores: Int {
        let mask = Int(clinux_usable_cores())
        return max(1, mask > 0 ? mask : Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// Runs `body(i)` for every `i` in `0..<count` on up to `threads` threads
    /// (the caller's among them) and returns when all have run. For blocking
    /// calls that the kernel completes faster together than one by one, such
    /// as fsyncs that share a journal commit.
    public static func parallel(count: Int, threads: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let width = max(1, min(threads, count))
        guard width > 1 else {
            for i in 0..<count { body(i) }
            return
        }
        var started: [pthread_t] = []
        var inline: [Int] = [0]  // lanes the caller runs itself (a thread that could not start)
        for lane in 1..<width {
            let box = Unmanaged.passRetained(Box { var i = lane; while i < count { body(i); i += width } }).toOpaque()
            var thread = pthread_t()
            let rc = pthread_create(&thread, nil, { arg in
                Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue().body()
                return nil
            }, box)
            if rc == 0 { started.append(thread) } else {
                Unmanaged<Box>.fromOpaque(box).release()
                inline.append(lane)
            }
        }
        for lane in inline { var i = lane; while i < count { body(i); i += width } }
        for t in started { pthread_join(t, nil) }
    }
}
