#!/usr/bin/env python3
"""Tests lazyfs itself: what survives a power loss, and the calls cached uses.

    test_lazyfs.py LAZYFS_BINARY

Mounts lazyfs over a scratch directory, does a set of writes (some fsynced,
some not), loses power, mounts again and checks each case. Prints one line
per case and `N passed, N failed` last; exits 1 on any failure.
"""
import fcntl
import mmap
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

LAZYFS = sys.argv[1]
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok else ": " + detail))


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


class Mount:
    def __init__(self, backing, mnt):
        self.mnt = mnt
        self.proc = subprocess.Popen([LAZYFS, "--exit-with-parent", backing, mnt], stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 10
        while not mounted(mnt):
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit("lazyfs did not mount: " + (self.proc.stderr.read() or ""))
            time.sleep(0.01)

    def power_loss(self):
        fd = os.open(self.mnt + "/.lazyfs-ctl", os.O_WRONLY)
        os.write(fd, b"powerloss\n")
        try:
            os.close(fd)
        except OSError:
            pass
        self.proc.wait(10)
        err = self.proc.stderr.read()
        deadline = time.time() + 10
        while mounted(self.mnt) and time.time() < deadline:
            time.sleep(0.01)
        return err

    def unmount(self):
        if mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], check=False)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def write_file(path, data, sync=True, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    os.write(fd, data)
    if sync:
        os.fsync(fd)
    os.close(fd)


def sync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    scratch = tempfile.mkdtemp(prefix="lazyfs-test-")
    try:
        run(scratch)
    finally:
        if not mounted(scratch + "/mnt"):
            shutil.rmtree(scratch, ignore_errors=True)
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


def run(scratch):
    backing, mnt = scratch + "/backing", scratch + "/mnt"
    os.mkdir(backing)
    os.mkdir(mnt)
    # Durable from the start: whatever is in the backing directory at mount
    # time. Each case has its own directory, so that one case's directory
    # fsync does not make another's entries durable.
    for d in ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c7/sub", "c8", "c9", "c10", "c11"]:
        os.mkdir(backing + "/" + d)
    for name, data in [("c3/old", b"old bytes"), ("c4/keepme", b"keep"), ("c5/log", b"HEAD"),
                       ("c6/victim", b"x" * 100), ("c6/trunc", b"0123456789" * 10),
                       ("c7/gone-later", b"bye"), ("c7/sub/inner", b"inner")]:
        with open(backing + "/" + name, "wb") as f:
            f.write(data)

    m = Mount(backing, mnt)
    try:
        M = mnt + "/"
        # 1. A durable name, data written without fsync: the bytes are lost.
        write_file(M + "c1/nosync", b"", sync=False)
        sync_dir(M + "c1")
        write_file(M + "c1/nosync", b"unsynced data", sync=False, flags=os.O_WRONLY)
        # 2. New file fsynced, its directory never: gone.
        write_file(M + "c2/nodirsync", b"synced but no dir fsync")
        # 3. temp + fsync + rename over + directory fsync: the new bytes.
        write_file(M + "c3/tmp1", b"new bytes")
        os.rename(M + "c3/tmp1", M + "c3/old")
        sync_dir(M + "c3")
        # 4. temp + fsync + rename over, no directory fsync: the old name keeps the old bytes.
        write_file(M + "c4/tmp2", b"replacement")
        os.rename(M + "c4/tmp2", M + "c4/keepme")
        # 5. Append + fsync: kept; a later append without fsync: lost.
        fd = os.open(M + "c5/log", os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"+one")
        os.fsync(fd)
        os.write(fd, b"+two")
        os.close(fd)
        # 6. Truncate without fsync: the old length; truncate + extend + fsync: zeros.
        fd = os.open(M + "c6/victim", os.O_RDWR)
        os.ftruncate(fd, 10)
        os.close(fd)
        fd = os.open(M + "c6/trunc", os.O_RDWR)
        os.ftruncate(fd, 5)
        os.ftruncate(fd, 20)
        os.pwrite(fd, b"Z", 30)
        os.fsync(fd)
        os.close(fd)
        # 7. Unlink with a directory fsync: gone; a file unlinked without one comes back.
        os.unlink(M + "c7/gone-later")
        os.unlink(M + "c7/sub/inner")
        sync_dir(M + "c7")
        # 8. mkdir: a new directory with its parent fsynced but itself not: empty;
        # one whose parent was not fsynced after it: gone.
        os.mkdir(M + "c8/newdir")
        write_file(M + "c8/newdir/child", b"child")
        sync_dir(M + "c8")
        os.mkdir(M + "c8/newdir2")
        write_file(M + "c8/newdir2/child", b"child")
        sync_dir(M + "c8/newdir2")
        # 9. An fsynced file renamed into a fsynced directory, then written without fsync.
        write_file(M + "c9/obj.tmp", b"object v1")
        os.mkdir(M + "c9/d")
        sync_dir(M + "c9")
        os.rename(M + "c9/obj.tmp", M + "c9/d/obj")
        sync_dir(M + "c9/d")
        fd = os.open(M + "c9/d/obj", os.O_WRONLY)
        os.pwrite(fd, b"XXXXXX", 0)
        os.close(fd)
        # 10. A hard link made durable, with fsynced data.
        write_file(M + "c10/linked", b"linked data")
        os.link(M + "c10/linked", M + "c10/link2")
        sync_dir(M + "c10")
        # 11. O_EXCL, pread, mmap, flock, fstat, statfs, sendfile, preadv2.
        try:
            os.open(M + "c3/old", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            check("O_CREAT|O_EXCL refuses an existing name", False, "it opened")
        except FileExistsError:
            check("O_CREAT|O_EXCL refuses an existing name", True)
        big = bytes(range(256)) * 1024
        write_file(M + "c11/big", big)
        sync_dir(M + "c11")
        fd = os.open(M + "c11/big", os.O_RDONLY)
        check("pread", os.pread(fd, 4, 256 * 10 + 1) == bytes([1, 2, 3, 4]))
        mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ, flags=mmap.MAP_PRIVATE)
        check("mmap reads the file's bytes", mm[:] == big)
        mm.close()
        check("fstat size", os.fstat(fd).st_size == len(big))
        try:
            n = os.preadv(fd, [bytearray(16)], 0, os.RWF_NOWAIT)
            check("preadv2 RWF_NOWAIT reads or declines", n == 16)
        except (BlockingIOError, OSError) as e:
            check("preadv2 RWF_NOWAIT reads or declines", e.errno in (11, 95), str(e))
        a, b = socket.socketpair()
        sent = os.sendfile(a.fileno(), fd, 0, 1000)
        got = b.recv(2000)
        check("sendfile from the mount", sent == 1000 and got == big[:1000])
        a.close(); b.close()
        os.close(fd)
        l1 = os.open(M + "c11/lock", os.O_RDWR | os.O_CREAT, 0o600)
        l2 = os.open(M + "c11/lock", os.O_RDWR)
        fcntl.flock(l1, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            fcntl.flock(l2, fcntl.LOCK_EX | fcntl.LOCK_NB)
            check("flock: a second exclusive lock is refused", False, "it was granted")
        except BlockingIOError:
            check("flock: a second exclusive lock is refused", True)
        os.close(l1); os.close(l2)
        check("statfs", os.statvfs(mnt).f_bsize > 0)
        check("the control file is not listed", ".lazyfs-ctl" not in os.listdir(mnt))
        current = [read(M + "c1/nosync"), read(M + "c4/keepme"), read(M + "c5/log"), read(M + "c9/d/obj")]
        check("before the loss every file reads its current bytes",
              current == [b"unsynced data", b"replacement", b"HEAD+one+two", b"XXXXXX v1"], repr(current))
        log = m.power_loss()
        check("the power loss unmounts", not mounted(mnt), log)
        check("lazyfs says what it kept", "power loss" in log, log)
    except BaseException:
        m.unmount()
        raise

    m = Mount(backing, mnt)
    try:
        M = mnt + "/"
        check("1. durable name, unsynced data: empty file", read(M + "c1/nosync") == b"", repr(read(M + "c1/nosync")))
        check("2. new file fsynced, directory not: gone", not os.path.exists(M + "c2/nodirsync"))
        check("3. temp, fsync, rename, directory fsync: new bytes", read(M + "c3/old") == b"new bytes")
        check("3. and the temp name is gone", not os.path.exists(M + "c3/tmp1"))
        check("4. rename without directory fsync: old bytes", read(M + "c4/keepme") == b"keep", repr(read(M + "c4/keepme")))
        check("4. and the temp name is gone too", not os.path.exists(M + "c4/tmp2"))
        check("5. append + fsync kept, later append lost", read(M + "c5/log") == b"HEAD+one", repr(read(M + "c5/log")))
        check("6. truncate without fsync: old length", read(M + "c6/victim") == b"x" * 100)
        want = b"01234" + b"\0" * 25 + b"Z"
        check("6. truncate, extend, write, fsync: zeros between", read(M + "c6/trunc") == want, repr(read(M + "c6/trunc")))
        check("7. unlink + directory fsync: gone", not os.path.exists(M + "c7/gone-later"))
        check("7. unlink without its directory's fsync: back", read(M + "c7/sub/inner") == b"inner")
        check("8. new directory, parent fsynced, itself not: empty", os.listdir(M + "c8/newdir") == [])
        check("8. new directory, parent not fsynced: gone", not os.path.exists(M + "c8/newdir2"))
        check("9. renamed fsynced file keeps its fsynced bytes", read(M + "c9/d/obj") == b"object v1", repr(read(M + "c9/d/obj")))
        check("9. and its old name, never fsynced away, survives as a hard link", read(M + "c9/obj.tmp") == b"object v1")
        st1, st2 = os.stat(M + "c10/linked"), os.stat(M + "c10/link2")
        check("10. hard link survives as a hard link", st1.st_ino == st2.st_ino and read(M + "c10/link2") == b"linked data")
        check("11. big file with fsync and directory fsync survives", read(M + "c11/big") == big)
        check("11. the lock file, never in a fsynced directory: gone", not os.path.exists(M + "c11/lock"))
        # Clean unmount keeps the current state.
        write_file(M + "clean", b"unsynced at a clean unmount", sync=False)
    finally:
        m.unmount()
    check("a clean unmount keeps unsynced data", read(backing + "/clean") == b"unsynced at a clean unmount")


main()
