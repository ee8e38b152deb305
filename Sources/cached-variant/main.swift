#if canImport(Glibc)
import Glibc
#endif
import CVipsShim

// cached-variant: the daemon's sandboxed image decoder (docs/architecture.md,
// "A variant"). The daemon starts it as `cached-variant --serve` with
// pipes on standard input and output and sets its RLIMIT_AS and RLIMIT_CPU
// from outside. It hardens itself, starts and warms up libvips, enters its
// seccomp sandbox, says it is ready and then answers jobs until its input
// ends (VariantWire).
//
// `cached-variant --probe-sandbox DIR` does the same start, then tries what
// the sandbox forbids and prints what happened (a test's and an operator's
// check that the filter holds on this kernel).

let arguments = CommandLine.arguments
let mode: HelperMode
var expectedParent: pid_t = 0
switch (arguments.count, arguments.dropFirst().first) {
case (2, "--serve"): mode = .serve
// The daemon names itself: a daemon that is pid 1 (in a container) is not
// mistaken for the init a helper whose parent died is given to.
case (4, "--serve") where arguments[2] == "--parent" && (pid_t(arguments[3]) ?? 0) > 0:
    mode = .serve
    expectedParent = pid_t(arguments[3]) ?? 0
case (3, "--probe-sandbox"): mode = .probe(directory: arguments[2])
default: HelperIO.die("usage: cached-variant --serve [--parent PID] | --probe-sandbox DIR", status: 2)
}

// Step 1, before anything else: die with the parent, no inherited
// descriptor or signal state, no working directory, private files.
if cvs_harden(expectedParent) != 0 {
    let why = errno == ESRCH ? "its parent is already gone" : String(cString: strerror(errno))
    HelperIO.die("cannot harden the process: \(why)", status: 1)
}

// Steps 2 to 4: libvips, its warm-up, the sandbox. The parent's pid is read
// now: getppid is not on the sandbox's allow-list.
let parent = getppid()
startSandboxedVips()

switch mode {
case .serve:
    JobLoop.serve()
case .probe(let directory):
    cvs_probe_sandbox(directory, parent)
    _exit(0)
}
