#if canImport(Glibc)
import Glibc
#endif
import CVipsShim

/// What the helper was started for.
enum HelperMode {
    /// Answer jobs on standard input and output.
    case serve
    /// Try what the sandbox forbids (DIR/probe is the file it tries to create).
    case probe(directory: String)
}

/// Steps 2 to 4 of the start: libvips for buffers alone, every codec run
/// once, then no_new_privs and the seccomp filter on every thread. Exits
/// with status 1 and a message on standard error when a step fails: a
/// helper that cannot sandbox itself never takes a job.
func startSandboxedVips() {
    var message = [CChar](repeating: 0, count: 1024)
    if cvs_vips_start(CommandLine.unsafeArgv[0], &message, message.count) != 0 {
        HelperIO.die(text(message), status: 1)
    }
    if cvs_warm_up(&message, message.count) != 0 {
        HelperIO.die(text(message), status: 1)
    }
    if cvs_enter_sandbox() != 0 {
        HelperIO.die("cannot enter the seccomp sandbox: \(String(cString: strerror(errno)))", status: 1)
    }
}

/// The NUL-terminated text a C call wrote into `buffer`.
private func text(_ buffer: [CChar]) -> String {
    let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
}
