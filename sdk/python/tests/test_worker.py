"""Python workers against real robonode processes."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List

from robonet import Client, Context, Worker
from conftest import Node, Running, bin_dir, eventually

SHOUT = """
name: shouts
version: 1
inputs:
  words: {type: list}
tasks:
  s:
    spread: ${{ inputs.words }}
    capability: py
    action: shout
    with: {word: "${{ item }}", times: 2}
outputs:
  words: ${{ tasks.s.output.map(o, o.word) }}
"""


def one_task(action: str, with_: str = "{}", extra: str = "", name: str = "") -> str:
    return f"""
name: {name or "one-" + action}
version: 1
tasks:
  t:
    capability: py
    action: {action}
    with: {with_}
{extra}
"""


def test_worker_serves_a_capability(node: Node, client: Client, serve: Callable[[Worker, str], Running]) -> None:
    w = Worker(capability="py", slots=4, name="shouter")

    @w.action("shout")
    def shout(ctx: Context, word: str, times: int = 1) -> Dict[str, Any]:
        ctx.progress(done=1, total=1, message="shouting")
        return {"word": word.upper() * times, "key": ctx.idempotency_key}

    @w.action()
    def boom(ctx: Context, n: int) -> None:
        raise ValueError(f"no good: {n}")

    @w.action()
    async def later(ctx: Context, n: int) -> int:
        await asyncio.sleep(0.01)
        return n + 1

    serve(w, node.addr)
    run = client.submit(SHOUT, {"words": ["a", "b", "c"]}, wait=True, wait_timeout=60)
    assert run.instance is not None
    assert run.instance.state == "COMPLETE", run.instance.error
    assert run.instance.outputs == {"words": ["AA", "BB", "CC"]}

    failed = client.submit(one_task("boom", "{n: 7}"), wait=True, wait_timeout=60).instance
    assert failed is not None and failed.state == "FAILED"
    err = failed.task("t").error
    assert "ValueError: no good: 7" in err and "test_worker.py" in err, err

    # A wrong-typed input fails the attempt with what is wrong.
    bad = client.submit(one_task("shout", '{word: 5}'), wait=True, wait_timeout=60).instance
    assert bad is not None and bad.state == "FAILED"
    assert "input word of action shout: want str, got int 5" in bad.task("t").error

    later_run = client.submit(one_task("later", "{n: 41}"), wait=True, wait_timeout=60).instance
    assert later_run is not None and later_run.task("t").output == 42


def test_attempt_moves_to_another_worker_when_its_node_dies(start_node: Callable[..., Node]) -> None:
    server = start_node("s", "--capability", "none")
    w1node = start_node("w1", "--capability", "none", "--join", server.gossip)
    runs: List[Dict[str, Any]] = []
    release = threading.Event()

    def make(name: str) -> Worker:
        w = Worker(capability="py", slots=2, name=name)

        @w.action("shout")
        def shout(ctx: Context, word: str, times: int = 1) -> Dict[str, Any]:
            runs.append({"by": name, "key": ctx.idempotency_key, "attempt": ctx.attempt})
            while not release.is_set():
                if ctx.cancelled():
                    return {"word": "cancelled"}
                time.sleep(0.02)
            return {"word": word.upper() * times, "by": name}

        return w

    p1 = Running(make("p1"), w1node.addr)
    c = Client(server.addr)
    try:
        sub = c.submit(SHOUT, {"words": ["x"]})
        eventually("the attempt on p1", lambda: len(runs) == 1)
        p2 = Running(make("p2"), server.addr)
        w1node.kill()
        eventually("the attempt again on p2", lambda: len(runs) == 2, timeout=60)
        assert runs[1]["by"] == "p2" and runs[1]["key"] == runs[0]["key"] and runs[1]["attempt"] == 1, runs
        release.set()
        inst = c.wait(sub.id, timeout=60)
        assert inst.state == "COMPLETE", inst.error
        assert inst.outputs == {"words": ["XX"]}
        attempts = inst.task("s").attempts
        assert [a.ok for a in attempts if not a.running] == [True], attempts  # recorded once
        assert attempts[-1].worker.startswith("s/"), attempts
        p2.stop()
    finally:
        release.set()
        p1.stop()
        c.close()


def test_cancel_and_timeout_reach_the_action(node: Node, client: Client, serve: Callable[[Worker, str], Running]) -> None:
    seen: Dict[str, str] = {}
    started = threading.Event()
    w = Worker(capability="py", slots=2, name="waiter")

    @w.action()
    def wait_forever(ctx: Context, tag: str) -> None:
        started.set()
        try:
            while True:
                ctx.progress(message="waiting")  # raises once cancelled
                time.sleep(0.02)
        finally:
            seen[tag] = ctx.cancel_reason

    @w.action()
    async def wait_async(ctx: Context, tag: str) -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen[tag] = ctx.cancel_reason
            raise

    serve(w, node.addr)
    sub = client.submit(one_task("wait_forever", "{tag: cancel}"))
    assert started.wait(30)
    client.cancel(sub.id)
    eventually("the action to see the cancel", lambda: seen.get("cancel") == "cancelled")
    assert client.wait(sub.id, 30).state == "CANCELLED"

    started.clear()
    sub = client.submit(one_task("wait_async", "{tag: async}"))
    assert started.wait(30)
    client.cancel(sub.id)
    eventually("the async action to be cancelled", lambda: seen.get("async") == "cancelled")

    timed = client.submit(one_task("wait_forever", "{tag: timeout}", "    timeout: 1s\n", name="timeout"), wait=True, wait_timeout=60).instance
    assert timed is not None and timed.state == "FAILED"
    eventually("the action to see the timeout", lambda: "timeout" in seen)
    assert seen["timeout"] == "timed out", seen


def test_progress_shows_in_roboctl_get(node: Node, client: Client, serve: Callable[[Worker, str], Running]) -> None:
    release = threading.Event()
    w = Worker(capability="py", slots=1, name="slow")

    @w.action()
    def slow(ctx: Context) -> str:
        ctx.progress(done=2, total=5, message="two of five pages")
        release.wait(60)
        return "ok"

    serve(w, node.addr)
    sub = client.submit(one_task("slow"))
    try:
        out = ""

        def shows() -> bool:
            nonlocal out
            out = subprocess.run([str(bin_dir() / "roboctl"), "--addr", node.addr, "get", sub.id],
                                 capture_output=True, text=True, check=True).stdout
            return "two of five pages" in out

        eventually("the progress in roboctl get", shows)
        p = client.get(sub.id).task("t").progress
        assert p is not None and (p.steps_done, p.steps_total) == (2, 5)
    finally:
        release.set()
    assert client.wait(sub.id, 30).task("t").output == "ok"


def test_action_logs_reach_roboctl_logs(node: Node, client: Client, serve: Callable[[Worker, str], Running]) -> None:
    import logging

    w = Worker(capability="py", slots=1, name="talker")

    @w.action()
    def talk(ctx: Context, who: str) -> str:
        print(f"hello {who} from print")
        logging.getLogger("talker").warning("hello %s from logging", who)
        return who

    serve(w, node.addr)
    inst = client.submit(one_task("talk", "{who: ada}"), wait=True, wait_timeout=60).instance
    assert inst is not None and inst.state == "COMPLETE", inst.error if inst else None
    assert w.logs_supported, "the node refused WorkerLog"
    # roboctl logs writes the task's stdout lines to its stdout, its stderr
    # lines (where logging records go) to its stderr.
    res = subprocess.run([str(bin_dir() / "roboctl"), "--addr", node.addr, "logs", inst.id, "t"],
                         capture_output=True, text=True, check=True)
    assert "hello ada from print" in res.stdout, res.stdout
    assert "WARNING talker: hello ada from logging" in res.stderr, res.stderr
    lines = [ln.text for ln in client.logs(inst.id, "t")]
    assert "hello ada from print" in lines, lines


def test_python_workflow_registers_and_runs(node: Node, client: Client, serve: Callable[[Worker, str], Running]) -> None:
    """A workflow written in Python (robonet.workflows) registers and runs on Python workers."""
    from robonet import inputs, task, workflow

    w = Worker(capability="py", slots=2, name="dsl")

    @w.action()
    def shout(ctx: Context, word: str) -> str:
        return word.upper()

    @w.action()
    def join(ctx: Context, words: List[str]) -> str:
        return " ".join(words)

    serve(w, node.addr)
    with workflow("py-shouts", version=1) as wf:
        wf.input("words", "list")
        loud = task("loud", capability="py", action="shout", spread=inputs.words, with_={"word": wf.item})
        said = task("said", capability="py", action="join", with_={"words": loud.output})
        wf.outputs["said"] = said.output
    info = wf.register(client)
    assert info is not None
    inst = client.submit("py-shouts", {"words": ["go", "now"]}, wait=True, wait_timeout=60).instance
    assert inst is not None and inst.state == "COMPLETE", inst.error if inst else None
    assert inst.outputs == {"said": "GO NOW"}, inst.outputs
    assert "dsl" in inst.task("said").attempts[0].worker, inst.task("said")  # ran on the Python worker
