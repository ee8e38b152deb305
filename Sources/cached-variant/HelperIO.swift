#if canImport(Glibc)
import Glibc
#endif

/// The helper's reads and writes on its pipes: plain `read` and `write`,
/// no buffering, nothing that opens or stats a file (the sandbox forbids it).
enum HelperIO {
    /// Reads until `buffer` is full or the input ends: the bytes read.
    /// Exits with status 2 on a read error.
    static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var done = 0
        while done < buffer.count {
            let n = read(fd, buffer.baseAddress! + done, buffer.count - done)
            if n > 0 {
                done += n
            } else if n == 0 {
                break
            } else if errno != EINTR {
                die("reading the job: \(String(cString: strerror(errno)))", status: 2)
            }
        }
        return done
    }

    /// Writes all of `bytes`. Exits (status 2) when the daemon is gone or the pipe fails.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) {
        var done = 0
        while done < bytes.count {
            let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n >= 0 {
                done += n
            } else if errno != EINTR {
                die("writing the answer: \(String(cString: strerror(errno)))", status: 2)
            }
        }
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { writeAll(fd, $0) }
    }

    /// Writes `cached-variant: MESSAGE` on standard error and exits with
    /// `status` at once (`_exit`: no atexit handler runs inside the sandbox).
    static func die(_ message: String, status: Int32) -> Never {
        let line = Array("cached-variant: \(message)\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        _exit(status)
    }
}
