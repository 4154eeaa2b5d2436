"""Capturing what an action logs: its prints and its logging records.

The attempt that runs is a context variable, set in the thread (or the
asyncio task) of each action. ``sys.stdout`` and ``sys.stderr`` are
replaced, once, by routers that send what an attempt writes to its log and
everything else to the original stream; a handler on the root logger does
the same with logging records. Threads an action starts itself do not
inherit the variable: their output goes where it would have gone.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
from typing import Any, List, Optional, TextIO, Tuple

from robonet._proto import worker_pb2

MAX_LINE_BYTES = 4 << 10  # a WorkerLog line, as the protocol bounds it
MAX_PENDING_BYTES = 1 << 20  # an attempt's lines not sent yet; beyond: dropped, counted
MAX_BATCH_LINES = 512
MAX_BATCH_BYTES = 256 << 10


def clip(line: str) -> str:
    """line, clipped to MAX_LINE_BYTES of UTF-8, saying so."""
    b = line.encode("utf-8", "replace")
    if len(b) <= MAX_LINE_BYTES:
        return line
    note = f" …[clipped: {len(b)} bytes]"
    keep = MAX_LINE_BYTES - len(note.encode("utf-8"))
    return b[:keep].decode("utf-8", "ignore") + note


class AttemptLog:
    """The lines of one attempt waiting to be sent."""

    def __init__(self, slot: int, attempt_id: str) -> None:
        self.slot = slot
        self.attempt_id = attempt_id
        self._mu = threading.Lock()
        self._lines: List[Tuple[str, str]] = []
        self._partial = {"stdout": "", "stderr": ""}
        self._bytes = 0
        self._dropped = 0

    def write(self, stream: str, text: str) -> None:
        """Adds text written to stream; complete lines become log lines."""
        with self._mu:
            text = self._partial[stream] + text
            *lines, rest = text.split("\n")
            if len(rest) > MAX_LINE_BYTES:  # a very long line without an end: sent in pieces
                lines.append(rest)
                rest = ""
            self._partial[stream] = rest
            for line in lines:
                self._add(stream, line.rstrip("\r"))

    def line(self, stream: str, line: str) -> None:
        """Adds whole lines (a logging record may span several)."""
        with self._mu:
            for part in line.split("\n"):
                self._add(stream, part)

    def _add(self, stream: str, line: str) -> None:
        line = clip(line)
        if self._bytes + len(line) > MAX_PENDING_BYTES:
            self._dropped += 1
            return
        self._bytes += len(line)
        self._lines.append((stream, line))

    def drain(self, final: bool = False) -> List[worker_pb2.ServeRequest]:
        """Takes the pending lines as WorkerLog requests; final also takes unfinished lines."""
        with self._mu:
            if final:
                for stream, rest in self._partial.items():
                    if rest:
                        self._add(stream, rest)
                    self._partial[stream] = ""
            lines, self._lines, self._bytes = self._lines, [], 0
            dropped, self._dropped = self._dropped, 0
        if dropped:
            lines.append(("stderr", f"[robonet: {dropped} lines dropped: the action wrote faster than they could be sent]"))
        batches: List[worker_pb2.WorkerLog] = []
        size = 0
        for stream, line in lines:
            cur = batches[-1] if batches else None
            if cur is None or cur.stream != stream or len(cur.lines) >= MAX_BATCH_LINES or size + len(line) > MAX_BATCH_BYTES:
                cur = worker_pb2.WorkerLog(slot=self.slot, attempt_id=self.attempt_id, stream=stream)
                batches.append(cur)
                size = 0
            cur.lines.append(line)
            size += len(line)
        # A message copies what it is given: the batches are wrapped once full.
        return [worker_pb2.ServeRequest(log=b) for b in batches]


current: contextvars.ContextVar[Optional[AttemptLog]] = contextvars.ContextVar("robonet_attempt_log", default=None)


class StreamRouter:
    """A stand-in for sys.stdout or sys.stderr: an attempt's writes go to its log."""

    def __init__(self, orig: TextIO, stream: str) -> None:
        self._orig = orig
        self._stream = stream

    def write(self, s: str) -> int:
        log = current.get()
        if log is None:
            return self._orig.write(s)
        log.write(self._stream, s)
        return len(s)

    def writelines(self, lines: List[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if current.get() is None:
            self._orig.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._orig, name)


class LogHandler(logging.Handler):
    """Sends the logging records of an attempt to its log (as stderr).

    Records outside attempts are left to the other handlers; when there
    is none, warnings and errors are printed as Python would without this
    handler.
    """

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        log = current.get()
        if log is None:
            root = logging.getLogger()
            if record.levelno >= logging.WARNING and all(isinstance(h, LogHandler) for h in root.handlers):
                last = logging.lastResort
                if last is not None:
                    last.handle(record)
            return
        try:
            log.line("stderr", self.format(record))
        except Exception:
            self.handleError(record)


_install_mu = threading.Lock()
_installed = False


def route_streams() -> None:
    """Makes sys.stdout and sys.stderr route an attempt's writes to its log.

    Called at install and again before every attempt: a program (or a test
    runner capturing output) may have replaced either stream since, and an
    action's prints must still reach its log.
    """
    with _install_mu:
        if not isinstance(sys.stdout, StreamRouter):
            sys.stdout = StreamRouter(sys.stdout, "stdout")  # type: ignore[assignment]
        if not isinstance(sys.stderr, StreamRouter):
            sys.stderr = StreamRouter(sys.stderr, "stderr")  # type: ignore[assignment]


def install(level: int) -> None:
    """Routes prints and logging records of attempts to their logs (once per process)."""
    global _installed
    route_streams()
    with _install_mu:
        if _installed:
            return
        _installed = True
        root = logging.getLogger()
        root.addHandler(LogHandler(level))
        if root.level > level:
            root.setLevel(level)
