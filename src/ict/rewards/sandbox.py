"""Run verifier calls in a child process with a hard wall-clock limit per call.

math-verify's own timeout uses SIGALRM, which works only in the main thread and cannot interrupt
a long C-level computation (e.g. a big-integer power). Here each call runs in a persistent child
process (`python -m ict.rewards._child`, JSON lines over stdin/stdout, so no `__main__` guard is
needed in user scripts); when a call overruns, the child is killed and a fresh one is started
for the next call.

`Sandbox.run(kind, *args)` returns `(value, error, timed_out)` and never raises for a failing or
hanging call (only `VerifierUnavailable` when no child can be started at all). Kinds: "math"
(answer equivalence, `_child.math_equal_unsafe`), "math_response" (a whole response,
`_child.math_response_unsafe`) and "_sleep" (tests only).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import sys
import threading
import weakref

STARTUP_S = 120.0  # start-up and imports of the child, not counted in the per-call limit
_LIVE: weakref.WeakSet = weakref.WeakSet()  # sandboxes to stop before interpreter shutdown


class VerifierUnavailable(RuntimeError):
    """The child process could not be started (math-verify missing or broken): a set-up error,
    raised rather than scored, so that a run does not train on a reward of 0 everywhere."""


@atexit.register
def _close_all() -> None:
    """Stop every child (and its reader thread) before the interpreter finalises its streams."""
    for sandbox in list(_LIVE):
        sandbox.close()


class Sandbox:
    """One persistent child process that runs verifier calls under `timeout_s` seconds each.

    Thread-safe (calls are serialised). Start-up (~1 s of imports) happens on the first call and
    is not counted in the limit. `restarts` counts children killed for overrunning.
    """

    def __init__(self, timeout_s: float = 5.0):
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self.restarts = 0
        self._process: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        _LIVE.add(self)

    def _start(self) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "ict.rewards._child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self._lines = queue.Queue()
        self._reader = threading.Thread(
            target=_pump, args=(self._process.stdout, self._lines), daemon=True
        )
        self._reader.start()
        ready = self._receive(STARTUP_S)
        if ready is None or ready.get("status") != "ready":
            self._kill()
            raise VerifierUnavailable(
                f"the verifier child process did not start within {STARTUP_S:g} s "
                "(is math-verify installed? pip install -e '.[train]' in a clone of ict)"
            )

    def _receive(self, timeout: float) -> dict | None:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            return None
        try:
            return json.loads(line)
        except ValueError:
            return {"status": "error", "error": f"unreadable reply {line[:80]!r}"}

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=10)
            if self._reader is not None:
                self._reader.join(timeout=10)  # it ends at the child's end of stream
            for stream in (self._process.stdin, self._process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        self._process = None

    def run(self, kind: str, *args) -> tuple[object, str | None, bool]:
        """Run one call; returns (value or None, error message or None, timed_out)."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
            request = {"kind": kind, "args": list(args), "timeout_s": self.timeout_s}
            try:
                self._process.stdin.write(json.dumps(request) + "\n")
                self._process.stdin.flush()
            except OSError:
                self._kill()
                return None, "verifier process died", False
            reply = self._receive(self.timeout_s)
            if reply is None:
                died = self._process.poll() is not None
                self._kill()
                if died:
                    return None, "verifier process died", False
                self.restarts += 1
                return None, f"timed out after {self.timeout_s:g} s", True
            if reply["status"] == "ok":
                return reply["value"], None, False
            return None, reply["error"], reply["status"] == "timeout"

    def close(self) -> None:
        """Stop the child process."""
        with self._lock:
            self._kill()

    def __del__(self):
        try:
            self._kill()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass


def _pump(stream, lines: queue.Queue) -> None:
    """Reader thread: move the child's stdout lines into a queue (None at end of stream)."""
    try:
        for line in stream:
            lines.put(line)
    except (OSError, ValueError):
        pass
    lines.put(None)
