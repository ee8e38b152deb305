"""A client of the cached daemon over its Unix socket (docs/protocol.md).

Standard library only, Python 3.9+::

    from cached_client import Client
    with Client() as cached:
        print(cached.post(1)["title"])
        rows = cached.images()
        open("row0.png", "wb").write(cached.image_data(0))

Every call sends one request line and reads its answer on one connection;
errors the daemon answers with raise ``CachedError`` (``.code``, ``.message``).
"""

from __future__ import annotations

import array
import io
import json
import os
import select
import socket
import stat
import time
from typing import Union, Any, BinaryIO, Dict, Iterator, List, Optional

__all__ = ["Client", "CachedError", "default_socket"]
__version__ = "0.1.0"

#: The codes of the daemon's error answers (docs/protocol.md, "Errors").
DAEMON_ERROR_CODES = ("bad_request", "not_found", "not_cached", "upstream", "too_large", "busy", "internal")
#: The client's own codes, never taken from the daemon: ``unavailable`` (no
#: daemon, or the connection broke), ``malformed`` (an answer this client
#: cannot read) and ``changed`` (a listing read page by page, ``iter_posts``
#: or ``iter_images``, changed between two of its pages).
CLIENT_ERROR_CODES = ("unavailable", "malformed", "changed")
#: Every ``CachedError.code``.
ERROR_CODES = DAEMON_ERROR_CODES + CLIENT_ERROR_CODES

#: What this client accepts from the daemon (docs/protocol.md, "Client
#: libraries"; the Swift client's ``ProtocolLimits``): past them an answer is
#: ``malformed``, so a misbehaving daemon cannot make it allocate without bound.
#: The longest answer line, without its newline: a feed at the default
#: ``max-object-size`` (64 MiB) listed whole, plus a tag as long as a request
#: line. The daemon refuses a listing page whose answer would be longer
#: (``bad_request`` with ``error.max_limit``, the entries that fit).
MAX_ANSWER_LINE = (64 << 20) + 65536
#: The new entries of a page of ``iter_posts`` and ``iter_images`` unless told
#: otherwise: with the one each request after the first repeats, 1,000 a
#: request, the most the daemon answers at once from memory (as cachectl).
PAGE_SIZE = 999
#: The largest ``read`` payload taken into memory; ``open_image`` has no limit.
MAX_READ_BYTES = 1 << 30
#: The most descriptors held before their answers are read (one per ``open``;
#: a connection has at most 256 requests unanswered).
MAX_PENDING_DESCRIPTORS = 256
#: The most objects one ``open`` names in ``hashes`` (docs/protocol.md,
#: "Limits"); ``open_objects`` asks for more in several requests.
MAX_OPEN_OBJECTS = 64
#: The most descriptors one message passes, and so one receive takes (an
#: ``open`` of many objects): more would be closed by the kernel unseen.
MAX_PASSED_DESCRIPTORS = 64


class CachedError(Exception):
    """A request that failed: ``code`` is one of ``ERROR_CODES``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message


def default_socket(environ: Optional[Dict[str, str]] = None) -> str:
    """The socket cachectl uses: ``CACHED_SOCKET``; else the user's daemon's
    if it exists; else the system daemon's if that exists; else the user's."""
    env = os.environ if environ is None else environ
    if env.get("CACHED_SOCKET"):
        return env["CACHED_SOCKET"]
    if env.get("RUNTIME_DIRECTORY"):
        mine = env["RUNTIME_DIRECTORY"].split(":")[0] + "/cached.sock"
    elif os.getuid() == 0:
        mine = "/run/cached/cached.sock"
    elif env.get("XDG_RUNTIME_DIR"):
        mine = env["XDG_RUNTIME_DIR"] + "/cached.sock"
    else:
        mine = _private_directory() + "/cached.sock"
    system = "/run/cached/cached.sock"
    if not os.path.exists(mine) and os.path.exists(system):
        return system
    return mine


def _private_directory() -> str:
    """``/tmp/cached-<uid>``: the socket's directory for a user with no XDG directories."""
    return f"/tmp/cached-{os.getuid()}"


def _check_directory(path: str) -> None:
    """Refuses a socket whose directory another user could change, as
    cachectl does: they could have put their own socket in the daemon's place.

    The per-user default directory (``/tmp/cached-<uid>``, which anyone could
    have created first) must be a real directory (not a link) owned by the
    caller that neither group nor others can write. Any other directory, and
    every directory above it, must not be writable by group or others unless
    it is root's and sticky (``/tmp``).
    """
    directory = os.path.dirname(os.path.abspath(path))
    private = _private_directory()
    try:
        same_as_private = directory == private or os.path.samefile(directory, private)
    except OSError:  # either does not exist
        same_as_private = False
    if same_as_private:
        try:
            st = os.lstat(private)
        except OSError:
            return  # connecting says why
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise CachedError("unavailable", f"refusing to connect to cached at {path}: {private} is not a real directory")
        if st.st_uid != os.getuid():
            raise CachedError("unavailable", f"refusing to connect to cached at {path}: {private} is owned by uid {st.st_uid}, "
                                             f"not by uid {os.getuid()}")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise CachedError("unavailable", f"refusing to connect to cached at {path}: {private} can be written by other users")
        return
    while True:
        try:
            st = os.stat(directory)
        except OSError:
            return  # connecting says why
        writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and not (st.st_uid == 0 and st.st_mode & stat.S_ISVTX):
            raise CachedError("unavailable", f"refusing to connect to cached at {path}: {directory} "
                                             f"(mode {oct(st.st_mode & 0o7777)}) can be written by other users, who "
                                             "could replace the socket (chmod go-w it)")
        if directory == "/":
            return
        directory = os.path.dirname(directory)


class Client:
    """A connection to the daemon at ``socket_path`` (by default the one
    cachectl uses), opened on first use; a context manager.

    ``timeout`` (seconds) bounds each wait for the daemon; ``None`` waits as
    long as it takes. The calls the daemon answers at once (``ping``,
    ``status``, ``post``, ``posts``) must have their whole answer within it,
    however slowly it comes. A prefetch or a download may rightly take long:
    give those calls a generous timeout or none.

    A connection the daemon closed while idle (it restarted) is replaced
    before the next request; one that breaks during a call raises
    ``unavailable`` (the request may or may not have run). One ``Client``
    serves one thread at a time: give each thread its own.
    """

    def __init__(self, socket_path: Optional[str] = None, timeout: Optional[float] = 60.0) -> None:
        self.socket_path = socket_path or default_socket()
        self.timeout = timeout
        self._sock: Optional[socket.socket] = None
        self._buffer = bytearray()
        # How much of _buffer holds no newline: each receive is searched
        # only in the bytes it added, not from the start again.
        self._scanned = 0
        self._fds: List[int] = []
        # A prefetch whose answer is still being read: another call first
        # abandons it (its connection is closed), or its lines would be read
        # as that call's answer.
        self._streaming = False

    # -- connection -----------------------------------------------------

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection (the next call opens a new one)."""
        self._streaming = False
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        self._buffer.clear()
        self._scanned = 0

    def _connect(self) -> socket.socket:
        if self._sock is not None and not self._buffer and not self._alive(self._sock):
            self.close()  # the daemon closed it while idle (it restarted): connect again
        if self._sock is None:
            _check_directory(self.socket_path)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self.timeout)
            try:
                s.connect(self.socket_path)
            except OSError as e:
                s.close()
                raise CachedError("unavailable", f"cannot connect to cached at {self.socket_path}: {e.strerror or e} "
                                                 "(is the daemon running? set CACHED_SOCKET)") from None
            self._sock = s
        return self._sock

    @staticmethod
    def _alive(sock: socket.socket) -> bool:
        """False when the peer has closed the connection (nothing is in flight on it)."""
        try:
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            if not poller.poll(0):
                return True
            return bool(sock.recv(1, socket.MSG_PEEK))  # b"": the end of the stream
        except (OSError, ValueError):
            return False

    def _fail(self, why: str) -> CachedError:
        self.close()
        return CachedError("unavailable", f"the connection to cached at {self.socket_path} {why}")

    def _fill(self, deadline: Optional[float] = None) -> None:
        # The connection the request went out on, never a new one: an
        # answer is read where its request was sent.
        sock = self._sock
        if sock is None:
            raise CachedError("unavailable", f"the connection to cached at {self.socket_path} was closed")
        wait = self.timeout
        if deadline is not None:  # a quick call: its whole answer by then
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(f"gave no answer within {self.timeout} s")
            wait = left if wait is None else min(wait, left)
        sock.settimeout(wait)
        try:
            data, fds, flags, _ = socket.recv_fds(sock, 65536, MAX_PASSED_DESCRIPTORS)
        except socket.timeout:
            raise self._fail(f"gave no answer within {self.timeout} s") from None
        except OSError as e:
            raise self._fail(f"failed: {e}") from None
        for fd in fds:
            os.set_inheritable(fd, False)
        self._fds.extend(fds)
        if len(self._fds) > MAX_PENDING_DESCRIPTORS:
            raise self._malformed(f"more than {MAX_PENDING_DESCRIPTORS} descriptors passed ahead of their open answers")
        if flags & socket.MSG_CTRUNC:
            raise self._malformed("descriptors passed with an answer were dropped (too many in one message, "
                                  "or this process is at its open-file limit)")
        if not data:
            raise self._fail("was closed before the answer")
        self._buffer += data

    def _malformed(self, why: str) -> CachedError:
        self.close()  # nothing after it on this connection can be trusted
        return CachedError("malformed", why)

    def _line(self, deadline: Optional[float] = None) -> Dict[str, Any]:
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                break
            self._scanned = len(self._buffer)
            if self._scanned > MAX_ANSWER_LINE:
                raise self._malformed(f"an answer line longer than {MAX_ANSWER_LINE} bytes")
            self._fill(deadline)
        if end > MAX_ANSWER_LINE:
            raise self._malformed(f"an answer line longer than {MAX_ANSWER_LINE} bytes")
        raw = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        self._scanned = 0
        try:
            value = json.loads(raw)
        except RecursionError:
            raise self._malformed(f"an answer nested too deeply to read: {raw[:200]!r}") from None
        except ValueError:
            raise self._malformed(f"an answer that is not JSON: {raw[:200]!r}") from None
        if not isinstance(value, dict):
            raise self._malformed(f"an answer that is not a JSON object: {raw[:200]!r}")
        return value

    def _bytes(self, count: int) -> bytearray:
        """The next ``count`` bytes: the buffer itself, grown as they arrive
        (never to the size declared) and handed over without a copy, so a
        payload is held once (1 GiB at ``MAX_READ_BYTES``, not three times)."""
        while len(self._buffer) < count:
            self._fill()
        out, self._buffer = self._buffer, self._buffer[count:]
        del out[count:]
        self._scanned = 0
        return out

    def _send(self, op: str, **fields: Any) -> None:
        if self._streaming:
            self.close()  # a prefetch still being read is abandoned
        line = json.dumps({"op": op, **{k: v for k, v in fields.items() if v is not None}}, separators=(",", ":")) + "\n"
        try:
            self._connect().sendall(line.encode())
        except CachedError:
            raise
        except OSError as e:
            raise self._fail(f"failed while sending: {e}") from None

    def _checked(self, answer: Dict[str, Any]) -> Dict[str, Any]:
        """``answer`` when it is an answer line as docs/protocol.md says (a
        boolean ``ok`` and, when false, an ``error`` with a string ``code``),
        else ``malformed``, dropping the connection as every refusal does."""
        ok = answer.get("ok")
        if ok is True:
            return answer
        error = answer.get("error")
        if ok is not False or not isinstance(error, dict) or not isinstance(error.get("code"), str):
            raise self._malformed(f"an answer without a boolean ok and an error code: {json.dumps(answer)[:200]}")
        code = error["code"] if error["code"] in DAEMON_ERROR_CODES else "internal"
        raise CachedError(code, str(error.get("message", "the daemon gave no reason")))

    def call(self, op: str, **fields: Any) -> Dict[str, Any]:
        """Sends one request and returns its answer line (an error raises)."""
        self._send(op, **fields)
        return self._checked(self._line())

    def _quick(self, op: str, **fields: Any) -> Dict[str, Any]:
        """``call`` for what the daemon answers at once (from memory): the
        whole answer must come within ``timeout``, however it trickles."""
        self._send(op, **fields)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        return self._checked(self._line(deadline))

    # -- operations -----------------------------------------------------

    def ping(self) -> Dict[str, Any]:
        """``{"version": ..., "protocol": ...}``."""
        a = self._quick("ping")
        return {"version": a.get("version"), "protocol": a.get("protocol")}

    def status(self) -> Dict[str, Any]:
        """What the store holds, the counters and the scrub (the ``status``
        answer as a dict; ``status()["scrub"]["last"]`` is the last scrub pass)."""
        a = self._quick("status")
        a.pop("ok", None)
        return a

    def post(self, id: Union[int, str]) -> Dict[str, Any]:
        """Post ``id`` (an int or a str) as stored (every field the feed
        gave). An int finds a string id of the same spelling and the other
        way round, so ``post("5")`` and ``post(5)`` both find post 5."""
        if isinstance(id, bool) or not isinstance(id, (int, str)):
            raise TypeError("a post id is an int or a str, not %s" % type(id).__name__)
        return self._quick("get_post", id=id)["post"]

    def delete_post(self, id: Union[int, str]) -> Union[int, str]:
        """Removes post ``id`` from the store (one ``posts-keep`` kept after
        the feed dropped it); returns the id it was kept by. Raises
        ``CachedError`` with code ``not_found`` when there is none."""
        if isinstance(id, bool) or not isinstance(id, (int, str)):
            raise TypeError("a post id is an int or a str, not %s" % type(id).__name__)
        return self.call("delete_post", id=id)["id"]

    def post_ids(self, offset: int = 0, limit: Optional[int] = None) -> List[Union[int, str]]:
        """The ids the posts are kept by (``posts-id``), in ``posts()``'s order."""
        return self._quick("list_posts", offset=offset, limit=limit).get("ids", [])

    def posts(self, offset: int = 0, limit: Optional[int] = None, query: Optional[str] = None) -> List[Dict[str, Any]]:
        """Posts from ``offset``, at most ``limit``: in ascending id order
        when every id is an integer, else in the feed's order. With
        ``query`` (at most 256 bytes of UTF-8), only the posts whose title
        holds it, ignoring case; ``offset`` and ``limit`` page the matches.
        One answer line: a page whose answer would pass 64 MiB is refused
        (``bad_request``); ``iter_posts`` reads any number."""
        return self._quick("list_posts", offset=offset, limit=limit, query=query)["posts"]

    def iter_posts(self, query: Optional[str] = None, page_size: int = PAGE_SIZE, offset: int = 0,
                   limit: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """Every post (or, with ``query``, every match; from ``offset``, at
        most ``limit``), in ``posts()``'s order, read ``page_size`` at a time
        as the iteration goes: a store of any size in the memory of one page.

        Raises ``CachedError`` as the calls do, and with code ``changed``
        when the posts changed between two pages (a refresh, a delete): the
        total is not the first page's, or a page does not begin where the
        last ended (each request after the first starts one post early, at
        the last one yielded, to check). A page refused as longer than an
        answer line (posts of megabytes) is asked again with the ``limit``
        the daemon says fits."""
        return self._walk("list_posts", "posts", page_size, offset, limit, query=query)

    def iter_images(self, page_size: int = PAGE_SIZE, offset: int = 0, limit: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """Every row of the manifest (from ``offset``, at most ``limit``), as
        ``images()`` gives them, read ``page_size`` at a time: ``iter_posts``'
        paging and checks (a row is told apart by its ``url`` and ``description``)."""
        return self._walk("list_images", "images", page_size, offset, limit)

    def _walk(self, op: str, member: str, page_size: int, offset: int, limit: Optional[int],
              query: Optional[str] = None) -> Iterator[Dict[str, Any]]:
        """The walk of ``iter_posts`` and ``iter_images`` (Swift's ``ListingWalk``)."""
        noun = "posts" if member == "posts" else "rows"
        page_size, start = max(1, page_size), max(0, offset)
        count = None if limit is None else max(0, limit)
        read, total, last, shrunk, overlapping = 0, None, None, None, True

        def key(entry: Any, entry_id: Any) -> Any:
            if member == "posts":
                return entry_id if entry_id is not None else (entry.get("id") if isinstance(entry, dict) else None)
            return (entry.get("url"), entry.get("description")) if isinstance(entry, dict) else None

        def changed(how: str) -> CachedError:
            return CachedError("changed", f"the {noun} changed while they were read page by page (a refresh or a delete in "
                                          f"between): {how}; {read} of them were read")

        while True:
            end = None if total is None else (total if count is None else min(total, start + count))
            position = start + read
            if end is not None and position >= end:
                return
            left = end - position if end is not None else (count - read if count is not None else page_size)
            request_offset, request_limit, overlaps = position, min(page_size, left), False
            if read > 0 and overlapping:
                request_offset, request_limit, overlaps = position - 1, request_limit + 1, True
            if shrunk is not None:
                request_limit = min(request_limit, shrunk)
            fields = {"offset": request_offset, "limit": request_limit, "query": query}
            self._send(op, **fields)
            answer = self._line(None if self.timeout is None or op != "list_posts" else time.monotonic() + self.timeout)
            error = answer.get("error") if answer.get("ok") is False else None
            fit = error.get("max_limit") if isinstance(error, dict) and error.get("code") == "bad_request" else None
            if isinstance(fit, int) and not isinstance(fit, bool) and 0 <= fit < request_limit:
                if overlaps and fit < 2:
                    overlapping, shrunk = False, 1  # only the repeated one fits: the next one alone, unchecked
                    continue
                if fit >= 1:
                    shrunk = fit
                    continue
            answer = self._checked(answer)
            entries, ids, got = answer.get(member), answer.get("ids") if member == "posts" else None, answer.get("total")
            if not isinstance(entries, list) or not isinstance(got, int) or isinstance(got, bool) or got < 0 \
                    or (ids is not None and (not isinstance(ids, list) or len(ids) != len(entries))) or len(entries) > request_limit:
                raise self._malformed(f"a {op} answer of another shape: {json.dumps(answer)[:200]}")
            if total is not None and got != total:
                raise changed(f"{total} at first, {got} now")
            total = got
            skip = 0
            if overlaps:
                if not entries or key(entries[0], ids[0] if ids else None) != last:
                    raise changed(f"the last of the {noun} read is no longer at position {request_offset}")
                skip = 1
            fresh, fresh_ids = entries[skip:], ids[skip:] if ids else None
            end = total if count is None else min(total, start + count)
            if not fresh and position < end:
                raise changed(f"the listing ended at position {position}, before {end}")
            read += len(fresh)
            if fresh:
                last = key(fresh[-1], fresh_ids[-1] if fresh_ids else None)
            shrunk, overlapping = None, True
            yield from fresh

    def image(self, row: int, fetch: bool = True) -> Dict[str, Any]:
        """Row ``row`` (``row``, ``url``, ``description``, ``hash``, ``size``,
        ``type``, ``path``); downloads the image first unless ``fetch`` is false."""
        return self.call("get_image", row=row, fetch=fetch)["image"]

    def image_variant(self, row: int, width: Optional[int] = None, height: Optional[int] = None,
                      fit: Optional[str] = None, format: Optional[str] = None) -> Dict[str, Any]:
        """Row ``row`` with a variant of its image, as ``image`` returns it plus
        ``variant`` (``hash``, ``size``, ``type``, ``path``, ``width``,
        ``height``): fitted into ``width`` x ``height`` pixels (either may be
        None), or covering it when ``fit`` is ``"cover"``, as ``format``
        (``jpeg``, ``png``, ``webp`` or ``avif``; default: the original's
        format when it is one of those, else webp). The daemon makes it once
        for every client and stores it; ``read`` takes its hash."""
        variant = {k: v for k, v in (("w", width), ("h", height), ("fit", fit), ("format", format)) if v is not None}
        return self.call("get_image", row=row, variant=variant)["image"]

    def variant_data(self, row: int, **variant: Any) -> bytearray:
        """The verified bytes of a variant of row ``row``'s image (the
        arguments of ``image_variant``)."""
        entry = self.image_variant(row, **variant)
        found = entry.get("variant")
        if not isinstance(found, dict) or not isinstance(found.get("hash"), str):
            raise self._malformed(f"a variant answer without the variant's hash: {json.dumps(entry)[:200]}")
        return self.read(found["hash"])

    def images(self, offset: int = 0, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The manifest's rows, each as ``image`` returns it (``hash`` None when
        not cached), in one answer line (refused past 64 MiB; ``iter_images``
        reads any number)."""
        return self.call("list_images", offset=offset, limit=limit)["images"]

    def _size(self, answer: Dict[str, Any], what: str) -> int:
        """The ``size`` of an ok ``read`` or ``open`` answer, else ``malformed``."""
        size = answer.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise self._malformed(f"{what} answer without a size: {json.dumps(answer)[:200]}")
        return size

    def read(self, hash: str) -> bytearray:
        """The verified bytes of the object named by ``hash`` (a bytearray:
        they are not copied again into ``bytes``)."""
        self._send("read", hash=hash)
        size = self._size(self._checked(self._line()), "a read")
        if size > MAX_READ_BYTES:
            raise self._malformed(f"a read answer of {size} bytes, more than the {MAX_READ_BYTES} this client reads into memory")
        return self._bytes(size)

    def image_data(self, row: int) -> bytearray:
        """Row ``row``'s image bytes, verified (downloaded first if need be)."""
        entry = self.image(row)
        if not entry.get("hash"):
            raise CachedError("not_cached", f"row {row} is not cached")
        return self.read(entry["hash"])

    def open_image(self, row: int) -> BinaryIO:
        """Row ``row``'s image as a read-only binary file the daemon opened
        and verified, passed over the socket (``open``); close it when done."""
        entry = self.image(row)
        if not entry.get("hash"):
            raise CachedError("not_cached", f"row {row} is not cached")
        for fd in self._fds:  # none belong to an answer still to come
            os.close(fd)
        self._fds = []
        self._send("open", hash=entry["hash"])
        answer = self._checked(self._line())
        if not self._fds:
            raise self._malformed("an open answer came without a file descriptor")
        size = self._size(answer, "an open")
        fd = self._fds.pop(0)
        for extra in self._fds:
            os.close(extra)
        self._fds = []
        problem = self._passed_file_problem(fd, size)
        if problem:
            os.close(fd)
            raise self._malformed(f"the descriptor passed with an open answer is {problem}")
        return io.open(fd, "rb", closefd=True)

    def open_objects(self, hashes: List[str]) -> List[Union[BinaryIO, CachedError]]:
        """The objects named by ``hashes`` as read-only binary files the daemon
        verified (``open`` of many objects, ``MAX_OPEN_OBJECTS`` hashes a
        request): one item per hash, in the order given, either the file
        (close it) or that object's own ``CachedError`` (``not_found``,
        ``internal``), returned, not raised, so none is dropped silently.
        A request refused whole (a malformed hash: ``bad_request``) raises,
        and nothing stays open."""
        out: List[Union[BinaryIO, CachedError]] = []
        try:
            for start in range(0, len(hashes), MAX_OPEN_OBJECTS):
                out.extend(self._open_batch(list(hashes[start:start + MAX_OPEN_OBJECTS])))
        except BaseException:
            for item in out:
                if not isinstance(item, CachedError):
                    item.close()
            raise
        return out

    def _open_batch(self, hashes: List[str]) -> List[Union[BinaryIO, CachedError]]:
        """One ``open`` with ``hashes``: the answer must name each hash in
        order with a ``size`` or an ``error`` code; each object opened takes
        the oldest descriptor received, a regular file of its size."""
        for fd in self._fds:  # none belong to an answer still to come
            os.close(fd)
        self._fds = []
        self._send("open", hashes=hashes)
        answer = self._checked(self._line())
        shown = json.dumps(answer)[:200]
        entries = answer.get("objects")
        if not isinstance(entries, list) or len(entries) != len(hashes):
            raise self._malformed(f"an open answer for {len(hashes)} objects without one entry per object: {shown}")
        sizes: List[Optional[int]] = []
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or entry.get("hash") != hashes[i]:
                raise self._malformed(f"entry {i} of an open answer does not name {hashes[i]}, the hash asked for there: {shown}")
            error = entry.get("error")
            if "size" in entry:
                sizes.append(self._size(entry, f"entry {i} of an open"))
            elif isinstance(error, dict) and isinstance(error.get("code"), str):
                sizes.append(None)
            else:
                raise self._malformed(f"entry {i} of an open answer has neither a size nor an error code: {shown}")
        opened = sum(1 for s in sizes if s is not None)
        if answer.get("opened", opened) != opened:
            raise self._malformed(f"an open answer that says {answer.get('opened')} objects were opened and lists {opened}: {shown}")
        if len(self._fds) < opened:
            raise self._malformed(f"an open answer for {opened} objects came with {len(self._fds)} descriptors: {shown}")
        passed, self._fds = self._fds[:opened], self._fds[opened:]
        for fd, size in zip(passed, (s for s in sizes if s is not None)):
            problem = self._passed_file_problem(fd, size)
            if problem:
                for d in passed:
                    os.close(d)
                raise self._malformed(f"a descriptor passed with an open answer is {problem}")
        files = iter(passed)
        out: List[Union[BinaryIO, CachedError]] = []
        for entry, size in zip(entries, sizes):
            if size is None:
                code = entry["error"]["code"]
                out.append(CachedError(code if code in DAEMON_ERROR_CODES else "internal",
                                       str(entry["error"].get("message", "the daemon gave no reason"))))
            else:
                out.append(io.open(next(files), "rb", closefd=True))
        return out

    @staticmethod
    def _passed_file_problem(fd: int, size: int) -> Optional[str]:
        """None when ``fd`` is a regular file of ``size`` bytes, else what is
        wrong (a passed ``/dev/zero`` or pipe would never end)."""
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kinds = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a pipe"),
                     (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
            kind = next((name for test, name in kinds if test(st.st_mode)), f"mode {oct(st.st_mode)}")
            return f"not a regular file ({kind})"
        if st.st_size != size:
            return f"a file of {st.st_size} bytes, not the {size} announced"
        return None

    def prefetch(self, what: str = "all", force: bool = False) -> Iterator[Dict[str, Any]]:
        """Refreshes the feeds and downloads what is not cached: yields each
        progress event (``{"event": "progress", "phase", "done", "total",
        "bytes"}``), then the summary (``posts``, ``images``, ``failures``) last.
        The request is sent when iteration starts; leaving it early closes
        the connection (the daemon still finishes the prefetch)."""
        self._send("prefetch", what=what, force=force, progress=True)
        self._streaming = True
        sock = self._sock
        finished = False
        try:
            while True:
                if self._sock is not sock or not self._streaming:
                    raise CachedError("unavailable", "the prefetch was abandoned: another call was made on this client")
                line = self._line()
                if "event" in line:
                    yield line
                    continue
                finished = True
                self._streaming = False
                summary = self._checked(line)
                summary.pop("ok", None)
                yield summary
                return
        finally:
            if not finished and self._sock is sock:
                self.close()  # the rest of its answer would be read as another's

    def verify(self) -> Dict[str, Any]:
        """Re-hashes every object: ``checked``, ``corrupt``, ``repaired``."""
        a = self.call("verify")
        a.pop("ok", None)
        return a
