#!/usr/bin/env python3
"""Attempts per second of a Python worker through one robonode.

Starts a robonode (SQLite, a temporary data dir, --capability none) and a
Python worker with 16 slots serving ``reflect`` (an echo: robonode's own
``echo`` is not a program's to claim) in a process of its own, then
submits instances each spreading ``--width`` reflect tasks and waits for
them all; prints attempts/s and each process's CPU (user+system seconds,
and as a share of one core over the run). Then the reference, in the same
run: the same on a fresh node served by the Go worker library
(examples/worker, its ``reflect`` action, as many slots), and the ratio of
the two. The node vouches for its worker programs (``--trust-peer '*/*'``):
the rate is measured, not a new program's probation.

    /usr/bin/python3 sdk/python/bench/worker_bench.py [--instances 4 --width 2500]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from robonet import Client, Context, Worker  # noqa: E402

REPO = HERE.parents[2]

SPEC = """
name: echo-bench
version: 1
inputs:
  n: {type: int}
tasks:
  e:
    spread: ${{ lists.range(inputs.n) }}
    capability: bench
    action: reflect
    with: {i: "${{ item }}"}
outputs:
  n: ${{ size(tasks.e.output) }}
"""


def serve(addr: str, slots: int) -> None:
    w = Worker(capability="bench", slots=slots, name="bench", capture_logs=False)

    @w.action()
    def reflect(ctx: Context, i: int) -> Dict[str, Any]:
        return {"i": i}

    w.run(addr)


def cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_node(bin_dir: str) -> "tuple[subprocess.Popen[str], str]":
    data = tempfile.mkdtemp(prefix="robonet-bench-")
    node = subprocess.Popen(
        [f"{bin_dir}/robonode", "--data-dir", data, "--grpc", "127.0.0.1:0", "--http", "off", "--gossip", "0", "--raft", "0",
         "--log-format", "json", "--capability", "none", "--trust-peer", "*/*"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    addr = ""
    assert node.stderr is not None
    for line in node.stderr:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("msg") == "node started":
            addr = e["grpc_addr"]
            break
    if not addr:
        sys.exit("robonode did not start")
    threading.Thread(target=lambda: [None for _ in node.stderr or []], daemon=True).start()
    return node, addr


def measure(args: argparse.Namespace, kind: str, go_worker: str) -> float:
    """Runs the instances against a fresh node served by one worker program; returns attempts/s."""
    node, addr = start_node(args.bin)
    if kind == "python":
        cmd = [sys.executable, __file__, "--serve", addr, "--slots", str(args.slots)]
    else:
        cmd = [go_worker, "--node", addr, "--capability", "bench", "--slots", str(args.slots), "--name", "bench"]
    worker = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = {"robonode": node.pid, f"{kind} worker": worker.pid, "bench (client)": os.getpid()}
    try:
        c = Client(addr)
        c.register(SPEC)
        warm = c.submit("echo-bench", {"n": 100})
        c.wait(warm.id, timeout=120)  # the worker connected, the Waggler placed
        before = {k: cpu(p) for k, p in procs.items()}
        t0 = time.monotonic()
        subs = c.submit_many("echo-bench", [{"n": args.width}] * args.instances)
        for s in subs:
            inst = c.wait(s.id, timeout=600)
            assert inst.state == "COMPLETE" and inst.outputs == {"n": args.width}, (inst.state, inst.error)
        elapsed = time.monotonic() - t0
        after = {k: cpu(p) for k, p in procs.items()}
        n = args.instances * args.width
        print(f"{kind:6s} worker: {n} attempts in {elapsed:.2f}s: {n / elapsed:,.0f} attempts/s "
              f"({args.slots} slots through one robonode, {os.cpu_count()} cores)")
        for k in procs:
            used = after[k] - before[k]
            print(f"  cpu {k:16s} {used:6.2f}s  ({100 * used / elapsed:.0f}% of a core)")
        rate: float = n / elapsed
        return rate
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
        node.kill()
        node.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=4)
    ap.add_argument("--width", type=int, default=2500)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--bin", default=str(REPO / "bin"))
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.slots)
        return
    # The reference, in the same run: the Go worker library (examples/worker,
    # serving the same reflect over the same protocol), on a node of its own.
    go_worker = os.path.join(tempfile.mkdtemp(prefix="robonet-bench-"), "worker")
    subprocess.run(["go", "build", "-o", go_worker, "./examples/worker"], cwd=REPO, check=True)
    py = measure(args, "python", go_worker)
    ref = measure(args, "go", go_worker)
    print(f"the Python worker at {py / ref:.2f}x the Go worker's rate")


if __name__ == "__main__":
    main()
