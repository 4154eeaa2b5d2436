"""examples/python: the worker as its README runs it, and SIGTERM mid-attempt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Iterator

import pytest

from robonet import Client
from conftest import REPO, Node, bin_dir, eventually


@pytest.fixture
def summarizer(node: Node) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "sdk" / "python")}
    p = subprocess.Popen([sys.executable, str(REPO / "examples/python/summarizer.py"), "--node", node.addr, "--slots", "2",
                          "--pause", "2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    yield p
    if p.poll() is None:
        p.kill()
        p.wait()


def test_example_worker_and_flow(node: Node, client: Client, summarizer: subprocess.Popen[str]) -> None:
    out = subprocess.run([str(bin_dir() / "roboctl"), "--addr", node.addr, "submit", str(REPO / "examples/python/summarize.yaml"),
                          "--wait"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    inst = client.get(client_latest(client))
    assert inst.state == "COMPLETE", inst.error
    assert inst.outputs["words"] == 27
    assert inst.outputs["summaries"][0] == "Wagglers dispatch tasks Workers beat every"


def test_sigterm_lets_the_running_attempt_finish(node: Node, client: Client, summarizer: subprocess.Popen[str]) -> None:
    sub = client.submit(str(REPO / "examples/python/summarize.yaml"), {"paragraphs": ["One. Two. Three."]})
    def midway() -> bool:
        p = client.get(sub.id).task("summarize").progress
        return p is not None and p.message == "sentence 2 of 3"

    eventually("the summary midway", midway)
    summarizer.send_signal(signal.SIGTERM)
    assert summarizer.wait(30) == 0
    # The attempt finished on the worker that was told to stop, once.
    eventually("the summary recorded", lambda: client.get(sub.id).task("summarize").status == "COMPLETED")
    attempts = client.get(sub.id).task("summarize").attempts
    assert [(a.attempt, a.ok) for a in attempts] == [(1, True)], attempts


def client_latest(client: Client) -> str:
    return next(client.list("summarize", limit=1)).id
