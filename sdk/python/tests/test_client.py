"""The client against a real robonode: submit, follow, steer."""

from __future__ import annotations

import threading
from typing import Callable, List

import grpc
import pytest

from robonet import Client, Context, FailedPreconditionError, InvalidArgumentError, NotFoundError, Worker
from conftest import Node, Running, eventually

APPROVAL = """
name: approval
version: 1
tasks:
  approve:
    wait: {signal: approve}
  apply:
    needs: [approve]
    capability: py
    action: apply
    with: {ok: "${{ tasks.approve.output.ok }}"}
outputs:
  applied: ${{ tasks.apply.output }}
"""


def test_signal_pause_resume_retry(node: Node, client: Client, serve: Callable[[Worker, str], Running]) -> None:
    healthy = threading.Event()
    w = Worker(capability="py", slots=1, name="applier")

    @w.action()
    def apply(ctx: Context, ok: bool) -> str:
        if not healthy.is_set():
            raise RuntimeError("the target is down")
        return f"applied {ok}"

    serve(w, node.addr)
    sub = client.submit(APPROVAL)
    eventually("approve waiting", lambda: client.get(sub.id).task("approve").waiting)

    client.pause(sub.id)
    eventually("the pause", lambda: client.get(sub.id).state == "PAUSED")
    client.resume(sub.id)
    eventually("the resume", lambda: client.get(sub.id).state != "PAUSED")

    with pytest.raises(FailedPreconditionError) as e:
        client.signal(sub.id, "reject")
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION and "reject" in e.value.message

    sig = client.signal(sub.id, "approve", {"ok": True}, idempotency_key="k1")
    assert sig.delivered and not sig.duplicate
    assert client.signal(sub.id, "approve", {"ok": True}, idempotency_key="k1").duplicate
    failed = client.wait(sub.id, timeout=60)
    assert failed.state == "FAILED" and "RuntimeError: the target is down" in failed.task("apply").error

    healthy.set()
    r = client.retry(sub.id)
    assert r.run == 2 and r.tasks == ["apply"]
    done = client.wait(sub.id, timeout=60)
    assert done.state == "COMPLETE" and done.outputs == {"applied": "applied True"} and done.run == 2

    with pytest.raises(FailedPreconditionError):
        client.retry(sub.id)


def test_submit_many_list_watch_and_errors(node: Node, client: Client, serve: Callable[[Worker, str], Running]) -> None:
    w = Worker(capability="py", slots=8, name="doubler")

    @w.action()
    def double(ctx: Context, n: int) -> int:
        return 2 * n

    serve(w, node.addr)
    spec = """
name: double
version: 1
inputs:
  n: {type: int}
tasks:
  d: {capability: py, action: double, with: {n: "${{ inputs.n }}"}}
outputs:
  n: ${{ tasks.d.output }}
"""
    info = client.register(spec)
    assert (info.name, info.version, info.capabilities) == ("double", 1, ["py"])
    subs = client.submit_many("double", [{"n": i} for i in range(5)], idempotency_keys=[f"k{i}" for i in range(5)])
    assert len(subs) == 5 and not any(s.existing for s in subs)
    again = client.submit("double", {"n": 0}, idempotency_key="k0")
    assert again.existing and again.id == subs[0].id
    outs = sorted(client.wait(s.id, timeout=60).outputs["n"] for s in subs)
    assert outs == [0, 2, 4, 6, 8]

    listed = list(client.list("double", states=["complete"], page_size=2))
    assert sorted(s.id for s in listed) == sorted(s.id for s in subs)
    assert len(list(client.list("double", limit=3))) == 3

    kinds: List[str] = [e.kind for e in client.watch(subs[0].id)]
    assert kinds[0] == "SNAPSHOT" and kinds[-1] == "STATE", kinds

    with pytest.raises(NotFoundError) as nf:
        client.get("00000000-0000-0000-0000-000000000000")
    assert nf.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(InvalidArgumentError) as bad:
        client.submit("double", {"n": "two"})
    assert "n" in bad.value.message
    with pytest.raises(ValueError, match="unencrypted"):
        Client("10.1.2.3:7233", token="secret")
