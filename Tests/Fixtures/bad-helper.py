#!/usr/bin/python3
"""A cached-variant that misbehaves on purpose (VariantTests): the daemon
must trust no size it states, no bytes it sends and no word of its sandbox.

The daemon starts it as `cached-variant --serve --parent PID`; its mode is
the first line of the file `bad-helper.mode` beside it:

  unsandboxed  says ready without a seccomp filter of its own
  huge         answers every job with a result header announcing 2^40 bytes
  extra        answers a made variant (a PNG) with bytes past its result
  silent       reads the job and never answers
  wrongformat  answers a PNG whatever format was asked
  threads      starts threads until it cannot (or 2,000), and answers how
               many it got as its failure's message
  mute         never says ready
  exit         reads the job and exits without an answer (a crash)
  garbage      answers with bytes that are not a result
  refuse       answers every job with "the image was refused"
"""
import ctypes
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODE = open(os.path.join(HERE, "bad-helper.mode")).read().split()[0]
PNG = open(os.path.join(HERE, "bad-helper.png"), "rb").read()


def allow_all_filter():
    """A seccomp filter of one instruction, allow: Seccomp 2 and one filter more."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    SECCOMP_RET_ALLOW = 0x7FFF0000

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    program = (SockFilter * 1)(SockFilter(0x06, 0, 0, SECCOMP_RET_ALLOW))  # BPF_RET | BPF_K
    prog = SockFprog(1, program)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        sys.exit("seccomp: errno %d" % ctypes.get_errno())


def read_exactly(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data


def result(status, width, height, payload, announced=None):
    length = len(payload) if announced is None else announced
    return b"CVRS" + bytes([status, 0, 0, 0]) + struct.pack("<IIQ", width, height, length) + payload


if MODE == "mute":
    read_exactly(1 << 30)
if MODE != "unsandboxed":
    allow_all_filter()
os.write(1, b"CVOK" + bytes([1, 0, 0, 0]))
while True:
    header = read_exactly(48)
    source_length = struct.unpack("<Q", header[40:48])[0]
    read_exactly(source_length)
    if MODE == "silent":
        continue
    if MODE == "exit":
        sys.exit(3)
    if MODE == "garbage":
        os.write(1, b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 64)
        continue
    if MODE == "refuse":
        os.write(1, result(1, 0, 0, b"not an image this helper likes"))
        continue
    if MODE == "threads":
        import threading
        import time
        started = 0
        try:
            for _ in range(2000):
                threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
                started += 1
        except RuntimeError:
            pass
        message = ("started %d threads" % started).encode()
        os.write(1, result(2, 0, 0, message))
        continue
    if MODE == "huge":
        os.write(1, result(0, 16, 16, b"", announced=1 << 40))
    elif MODE == "extra":
        os.write(1, result(0, 16, 16, PNG) + b"more bytes")
    else:
        os.write(1, result(0, 16, 16, PNG))
