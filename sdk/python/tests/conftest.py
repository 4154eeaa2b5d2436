"""Fixtures: real robonode processes on loopback (SQLite, temporary data dirs).

The binaries come from $ROBONET_BIN (a directory), else ../../bin of the
repository, built with `go build -o bin/ ./cmd/...` when missing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

from robonet import Client, Worker

REPO = Path(__file__).resolve().parents[3]


def bin_dir() -> Path:
    d = Path(os.environ.get("ROBONET_BIN", REPO / "bin"))
    if not (d / "robonode").exists() or not (d / "roboctl").exists():
        subprocess.run(["go", "build", "-o", str(d) + "/", "./cmd/robonode", "./cmd/roboctl"], cwd=REPO, check=True)
    return d


class Node:
    """A robonode process; its JSON log is kept."""

    def __init__(self, name: str, data_dir: Path, *args: str) -> None:
        self.name = name
        self.args = ["--name", name, "--data-dir", str(data_dir), "--grpc", "127.0.0.1:0", "--http", "off",
                     "--gossip", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--log-format", "json",
                     "--heartbeat-interval", "200ms", "--shutdown-timeout", "5s", "--trust-peer", "*", "--trust-peer", "*/*", *args]
        self.proc = subprocess.Popen([str(bin_dir() / "robonode"), *self.args], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: List[str] = []
        self.addr = ""
        self.gossip = ""
        started = threading.Event()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("msg") == "node started":
                    self.addr, self.gossip = e.get("grpc_addr", ""), e.get("gossip_addr", "")
                    started.set()
            started.set()

        threading.Thread(target=read, daemon=True).start()
        if not started.wait(60) or not self.addr:
            self.kill()
            raise RuntimeError(f"robonode {name} did not start:\n{''.join(self.lines[-30:])}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def log(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def start_node(tmp_path: Path) -> Iterator[Callable[..., Node]]:
    nodes: List[Node] = []

    def start(name: str = "n1", *args: str) -> Node:
        d = tmp_path / name
        d.mkdir()
        n = Node(name, d, *args)
        nodes.append(n)
        return n

    yield start
    for n in nodes:
        n.kill()


@pytest.fixture
def node(start_node: Callable[..., Node]) -> Node:
    """A single robonode that serves no capability itself."""
    return start_node("n1", "--capability", "none")


@pytest.fixture
def client(node: Node) -> Iterator[Client]:
    c = Client(node.addr)
    yield c
    c.close()


class Running:
    """A worker served from a thread of the test process."""

    def __init__(self, w: Worker, addr: str) -> None:
        self.w = w
        self.error: Optional[BaseException] = None

        def serve() -> None:
            try:
                w.run(addr, handle_signals=False)
            except BaseException as e:  # noqa: BLE001
                self.error = e

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        if not w.connected.wait(30):
            raise RuntimeError(f"worker {w.name} did not connect: {self.error}")

    def stop(self, grace: float = 0) -> None:
        self.w.stop(grace=grace)
        self.thread.join(30)


@pytest.fixture
def serve() -> Iterator[Callable[[Worker, str], Running]]:
    running: List[Running] = []

    def start(w: Worker, addr: str) -> Running:
        r = Running(w, addr)
        running.append(r)
        return r

    yield start
    for r in running:
        r.stop()


def eventually(what: str, cond: Callable[[], bool], timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
