#!/usr/bin/env python3
"""Open a page in headless Chromium and wait until a JS condition holds.

    page_check.py URL --until 'JS EXPRESSION' [--timeout 30]
                  [--screenshot OUT.png] [--report OUT.json]
                  [--then-run 'SHELL COMMAND'] [--until2 'JS EXPRESSION']
                  [--step 'JS EXPRESSION' | --do 'JS EXPRESSION' ...]
                  [--eval 'JS EXPRESSION' ...]
                  [--width 1200 --height 2400 --mobile]
                  [--startup-timeout 60] [--chromium /usr/bin/chromium]

Talks the DevTools protocol over --remote-debugging-pipe (NUL-terminated JSON;
the browser reads commands on its fd 3 and writes replies on its fd 4), so it
needs no websocket library: Python 3.11 standard library only.

Opens a page target, navigates to URL and evaluates --until every 100 ms until
it is truthy (JS truthiness) or --timeout seconds pass. Then, when given, runs
--then-run in a shell (the page stays open) and polls --until2 the same way.
Then the --step and --do options in their order: a --step is waited for as
--until is, a --do is evaluated once (a click, a new location.hash); the
report's "phase" names the step that timed out (step 3). --width, --height
and --mobile set the viewport (1200x2400, not mobile, by default).
At the end it prints a JSON report: whether it held, the data-* attributes of
the page's #summary element, console errors, uncaught exceptions and log
errors, and the value of each --eval expression; writes it to --report, and a
full-page PNG to --screenshot.

Exit status: 0 when every condition held (and --then-run exited 0); 1 when
the page did not open (connection refused...), a condition timed out or
--then-run failed; 2 when the driver itself failed (Chromium did not start or
answer, the pipe broke), so a caller may skip rather than fail on 2.
Chromium (its whole process group) is always killed at the end.
"""
import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SUMMARY_JS = """(() => {
  const s = document.getElementById('summary');
  if (!s) return null;
  const o = {};
  for (const a of s.attributes) if (a.name.startsWith('data-')) o[a.name.slice(5)] = a.value;
  return o;
})()"""


class DriverError(Exception):
    """The driver could not do its job (exit 2)."""


class Browser:
    """One Chromium process and its DevTools pipe."""

    def __init__(self, binary, startup_timeout):
        self.profile = tempfile.mkdtemp(prefix="page_check-")
        self.stderr = tempfile.TemporaryFile()
        self.proc = None
        self.buf = b""
        self.next_id = 0
        self.events = []          # (method, params, sessionId) not yet consumed
        self.console = []         # console errors, exceptions, log errors
        self.startup_timeout = startup_timeout
        # Parent writes to_r's other end; the child reads it as fd 3.
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def child_fds():
            # Copy both ends above 10 first so dup2 onto 3 and 4 cannot
            # clobber one with the other, then make them the child's 3 and 4.
            a = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.close(a)
            os.close(b)

        args = [binary, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--user-data-dir=" + self.profile, "--no-first-run",
                "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-dev-shm-usage",
                "--disable-component-update", "--disable-sync", "--mute-audio",
                "--hide-scrollbars", "--password-store=basic", "--use-mock-keychain",
                "about:blank"]
        try:
            # Every other descriptor of ours is close-on-exec (PEP 446), so
            # close_fds=False passes on only 0-2 and the 3 and 4 made above.
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=self.stderr, close_fds=False,
                                         preexec_fn=child_fds, start_new_session=True)
        except OSError as e:
            self.close()
            raise DriverError(f"cannot start {binary}: {e}") from None
        finally:
            os.close(to_r)
            os.close(from_w)

    # -- the pipe --

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        try:
            while data:
                n = os.write(self.to_w, data)
                data = data[n:]
        except OSError as e:
            raise DriverError(f"the DevTools pipe broke while sending {method}: {e}{self.stderr_tail()}") from None
        return self.next_id

    def read_message(self, deadline):
        """The next message, or None at the deadline."""
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.from_r], [], [], left)
            if not r:
                return None
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                code = self.proc.poll()
                raise DriverError("Chromium closed the DevTools pipe"
                                  + (f" (exit status {code})" if code is not None else "") + self.stderr_tail())
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None, timeout=30):
        """Sends a command and waits for its reply; events meanwhile are kept."""
        mid = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self.read_message(deadline)
            if msg is None:
                raise DriverError(f"no reply to {method} in {timeout:g} s{self.stderr_tail()}")
            if msg.get("id") == mid:
                if "error" in msg:
                    raise CDPError(method, msg["error"])
                return msg.get("result", {})
            if "method" in msg:
                self.note_event(msg)

    def note_event(self, msg):
        method, p = msg["method"], msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", a.get("type")))) for a in p.get("args", []))
            self.console.append({"kind": "console." + p["type"], "text": text})
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text", "")
            self.console.append({"kind": "exception", "text": text,
                                 "where": f"{d.get('url', '')}:{d.get('lineNumber', 0) + 1}"})
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            self.console.append({"kind": "log." + e.get("source", ""), "text": e.get("text", ""),
                                 "url": e.get("url", "")})
        elif method in ("Inspector.detached", "Inspector.targetCrashed", "Target.targetCrashed"):
            self.console.append({"kind": method, "text": json.dumps(p)})
        del self.console[:-50]

    def pump(self, seconds):
        """Reads events for `seconds` (so console errors are collected while waiting)."""
        deadline = time.monotonic() + seconds
        while (msg := self.read_message(deadline)) is not None:
            if "method" in msg:
                self.note_event(msg)

    def stderr_tail(self):
        try:
            self.stderr.seek(0)
            lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return ("\nChromium's stderr (last lines):\n  " + "\n  ".join(lines[-8:])) if lines else ""

    # -- life --

    def wait_ready(self):
        """Waits until the browser answers on the pipe (slow on a loaded machine)."""
        try:
            return self.call("Browser.getVersion", timeout=self.startup_timeout)
        except DriverError as e:
            code = self.proc.poll()
            if code is not None:
                raise DriverError(f"Chromium exited with status {code} before answering{self.stderr_tail()}") from None
            raise DriverError(f"Chromium did not answer in {self.startup_timeout:g} s: {e}") from None

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.send("Browser.close")
                self.proc.wait(timeout=3)
            except (DriverError, subprocess.TimeoutExpired, OSError):
                pass
        if self.proc is not None:
            # Renderers and the zygote share its process group (new session).
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for fd in ("to_w", "from_r"):
            if getattr(self, fd, None) is not None:
                try:
                    os.close(getattr(self, fd))
                except OSError:
                    pass
                setattr(self, fd, None)
        shutil.rmtree(self.profile, ignore_errors=True)
        self.stderr.close()


class CDPError(DriverError):
    def __init__(self, method, error):
        super().__init__(f"{method} failed: {error.get('message')} {error.get('data', '')}".strip())


class Page:
    def __init__(self, browser, width=1200, height=2400, mobile=False):
        self.b = browser
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for m in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.call(m)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})

    def call(self, method, params=None, timeout=30):
        return self.b.call(method, params, self.session, timeout)

    def navigate(self, url):
        """None, or why the page did not open (net::ERR_CONNECTION_REFUSED...)."""
        r = self.call("Page.navigate", {"url": url}, timeout=60)
        return r.get("errorText") or None

    def evaluate(self, expression):
        """The value of `expression` (returnByValue), or raises EvalError."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                            "awaitPromise": True, "timeout": 5000})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise EvalError(d.get("exception", {}).get("description") or d.get("text", "exception"))
        return r.get("result", {}).get("value")

    def wait_until(self, expression, timeout):
        """True once `!!(expression)` is true; False after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        probe = f"!!({expression}\n)"
        last_error = None
        while True:
            try:
                if self.evaluate(probe) is True:
                    return True, None
                last_error = None
            except EvalError as e:
                last_error = str(e)
            except CDPError as e:    # e.g. no execution context while navigating
                last_error = str(e)
            if time.monotonic() >= deadline:
                return False, last_error
            self.b.pump(0.1)

    def screenshot(self, path):
        r = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, timeout=60)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))


class EvalError(Exception):
    pass


class Ordered(argparse.Action):
    """--step and --do into one list of (kind, expression), in order."""

    def __call__(self, parser, namespace, values, option_string=None):
        getattr(namespace, self.dest).append((option_string.lstrip("-"), values))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("--until", required=True, help="JS expression to wait for (truthy)")
    ap.add_argument("--timeout", type=float, default=30, help="seconds for each condition (30)")
    ap.add_argument("--screenshot", help="write a full-page PNG here")
    ap.add_argument("--report", help="write the JSON report here")
    ap.add_argument("--then-run", help="shell command to run once --until holds")
    ap.add_argument("--until2", help="JS expression to wait for after --then-run")
    ap.add_argument("--step", action=Ordered, dest="actions", default=[], metavar="JS",
                    help="JS expression to wait for after --until2 (repeatable, in order with --do)")
    ap.add_argument("--do", action=Ordered, dest="actions", default=[], metavar="JS",
                    help="JS expression to evaluate once, in order with --step (repeatable)")
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--height", type=int, default=2400)
    ap.add_argument("--mobile", action="store_true", help="emulate a phone (touch, mobile viewport)")
    ap.add_argument("--eval", action="append", default=[], metavar="JS",
                    help="JS expression whose value goes in the report's \"eval\" (repeatable)")
    ap.add_argument("--startup-timeout", type=float, default=60, help="seconds for Chromium to answer (60)")
    ap.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    a = ap.parse_args()

    # SIGTERM unwinds like Ctrl-C, so the finally below still kills Chromium.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    started = time.monotonic()
    report = {"url": a.url, "ok": False, "phase": "startup"}
    browser = None
    status = 2
    try:
        browser = Browser(a.chromium, a.startup_timeout)
        report["browser"] = browser.wait_ready().get("product")
        report["startup_seconds"] = round(time.monotonic() - started, 2)
        page = Page(browser, a.width, a.height, a.mobile)
        status = 1
        report["phase"] = "navigate"
        # A page that does not open is the page's failure (1), not the driver's.
        err = page.navigate(a.url)
        ok = err is None
        if ok:
            report["phase"] = "until"
            ok, err = page.wait_until(a.until, a.timeout)
        if ok and a.then_run:
            report["phase"] = "then-run"
            t = time.monotonic()
            run = subprocess.run(a.then_run, shell=True, capture_output=True, text=True, errors="replace")
            report["then_run"] = {"command": a.then_run, "status": run.returncode,
                                  "seconds": round(time.monotonic() - t, 2),
                                  "output": (run.stdout + run.stderr)[-2000:]}
            browser.pump(0)
            ok = run.returncode == 0
            err = None if ok else f"--then-run exited with status {run.returncode}"
        if ok and a.until2:
            report["phase"] = "until2"
            ok, err = page.wait_until(a.until2, a.timeout)
        for n, (kind, expr) in enumerate(a.actions if ok else [], 1):
            report["phase"] = f"step {n}"
            if kind == "do":
                try:
                    page.evaluate(expr)
                except EvalError as e:
                    ok, err = False, f"--do {expr!r}: {e}"
            else:
                ok, err = page.wait_until(expr, a.timeout)
            if not ok:
                err = f"{err or 'timed out'} (waiting for {expr!r})" if kind == "step" else err
                break
        if ok:
            report["phase"] = "done"
            status = 0
        report["ok"] = ok
        if err:
            report["error"] = err
        try:
            report["summary"] = page.evaluate(SUMMARY_JS)
        except EvalError as e:
            report["summary"] = None
            report["summary_error"] = str(e)
        if a.eval:
            report["eval"] = {}
            for expr in a.eval:
                try:
                    report["eval"][expr] = page.evaluate(expr)
                except EvalError as e:
                    report["eval"][expr] = {"exception": str(e)}
        if a.screenshot:
            page.screenshot(a.screenshot)
    except DriverError as e:
        status = 2
        report["ok"] = False
        report["driver_error"] = str(e)
        print(f"page_check: {e}", file=sys.stderr)
    finally:
        if browser is not None:
            report["errors"] = browser.console
            browser.close()
    report["seconds"] = round(time.monotonic() - started, 2)
    text = json.dumps(report, indent=2)
    print(text)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text + "\n")
    if status == 1:
        phase, err = report["phase"], report.get("error")
        if phase == "navigate":
            print(f"page_check: cannot open {a.url}: {err}", file=sys.stderr)
        elif phase == "then-run":
            print(f"page_check: {err}", file=sys.stderr)
        elif phase.startswith("step"):
            print(f"page_check: {phase}: {err}", file=sys.stderr)
        else:
            print(f"page_check: timed out waiting for --{phase}"
                  + (f" (last evaluation error: {err})" if err else ""), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
