"""The client: register workflows, submit instances, and follow, inspect and steer them.

::

    from robonet import Client

    c = Client("127.0.0.1:7233")
    run = c.submit("examples/demo.yaml", {"count": 3}, wait=True)
    print(run.instance.state, run.instance.outputs)

Every call raises a :class:`robonet.errors.RobonetError` subclass when the
node refuses it, keeping the gRPC status code and the node's message.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, TypeVar, Union

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from robonet import _conn
from robonet._proto import api_pb2, api_pb2_grpc
from robonet.errors import RobonetError, from_rpc_error

T = TypeVar("T")

TERMINAL = frozenset({"COMPLETE", "FAILED", "CANCELLED"})


def _time(ts: timestamp_pb2.Timestamp, has: bool) -> Optional[datetime.datetime]:
    if not has:
        return None
    return datetime.datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, tz=datetime.timezone.utc)


def _json(text: str) -> Any:
    return json.loads(text) if text else None


def _state(v: int) -> str:
    return str(api_pb2.InstanceState.Name(v)).removeprefix("INSTANCE_STATE_")


@dataclass
class WorkflowInfo:
    name: str
    version: int
    ir_hash: str
    description: str
    tasks: int
    capabilities: List[str]
    created_at: Optional[datetime.datetime]

    @classmethod
    def _of(cls, w: api_pb2.WorkflowInfo) -> "WorkflowInfo":
        return cls(w.name, w.version, w.ir_hash, w.description, w.tasks, list(w.capabilities), _time(w.created_at, w.HasField("created_at")))


@dataclass
class Progress:
    """What the latest heartbeat of a running attempt said."""

    attempt: int
    execution_id: str
    worker_id: str
    steps_done: int
    steps_total: int
    message: str

    @classmethod
    def _of(cls, p: api_pb2.TaskProgress) -> "Progress":
        return cls(p.attempt, p.execution_id, p.worker_id, p.steps_done, p.steps_total, p.message)


@dataclass
class Attempt:
    index: int
    attempt: int
    node: str
    worker: str
    running: bool
    ok: bool
    error: str
    started_at: Optional[datetime.datetime]
    finished_at: Optional[datetime.datetime]

    @classmethod
    def _of(cls, a: api_pb2.TaskAttempt) -> "Attempt":
        return cls(a.index, a.attempt, a.node, a.worker, a.running, a.ok, a.error,
                   _time(a.started_at, a.HasField("started_at")), _time(a.finished_at, a.HasField("finished_at")))


@dataclass
class Task:
    name: str
    capability: str
    action: str
    #: WAITING, RUNNING, RETRYING, COMPLETED, FAILED, SKIPPED or CANCELLED.
    status: str
    attempt: int
    max_attempts: int
    #: The task's output (decoded JSON); None until it has one.
    output: Any
    error: str
    progress: Optional[Progress]
    attempts: List[Attempt]
    needs: List[str]
    waiting: bool
    wait_signal: str

    @classmethod
    def _of(cls, t: api_pb2.TaskState) -> "Task":
        return cls(
            t.name, t.capability, t.action, str(api_pb2.TaskStatus.Name(t.status)).removeprefix("TASK_STATUS_"),
            t.attempt, t.max_attempts, _json(t.output_json), t.error,
            Progress._of(t.progress) if t.HasField("progress") else None,
            [Attempt._of(a) for a in t.attempts], list(t.needs), t.waiting, t.wait_signal,
        )


@dataclass
class Instance:
    """A workflow instance with its tasks. ``raw`` is the API's message."""

    id: str
    workflow: str
    version: int
    #: PENDING, RUNNING, GATHERING, PAUSED, COMPLETE, FAILED or CANCELLED.
    state: str
    inputs: Any
    #: The outputs (decoded JSON) once COMPLETE; None before.
    outputs: Any
    error: str
    tasks: List[Task]
    run: int
    paused: bool
    created_at: Optional[datetime.datetime]
    finished_at: Optional[datetime.datetime]
    raw: api_pb2.Instance = field(repr=False)

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    def task(self, name: str) -> Task:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(f"instance {self.id} has no task {name} (it has {', '.join(t.name for t in self.tasks)})")

    @classmethod
    def _of(cls, i: api_pb2.Instance) -> "Instance":
        return cls(
            i.id, i.workflow, i.version, _state(i.state), _json(i.inputs_json), _json(i.outputs_json), i.error,
            [Task._of(t) for t in i.tasks], i.run, i.paused,
            _time(i.created_at, i.HasField("created_at")), _time(i.finished_at, i.HasField("finished_at")), i,
        )


@dataclass
class InstanceSummary:
    id: str
    workflow: str
    version: int
    state: str
    error: str
    created_at: Optional[datetime.datetime]
    finished_at: Optional[datetime.datetime]
    parent_instance_id: str

    @classmethod
    def _of(cls, s: api_pb2.InstanceSummary) -> "InstanceSummary":
        return cls(s.id, s.workflow, s.version, _state(s.state), s.error, _time(s.created_at, s.HasField("created_at")),
                   _time(s.finished_at, s.HasField("finished_at")), s.parent_instance_id)


@dataclass
class Submission:
    """What submit answered; with wait=True, instance is the finished instance."""

    id: str
    existing: bool
    workflow: Optional[WorkflowInfo]
    warnings: List[str]
    instance: Optional[Instance] = None


@dataclass
class Event:
    """One event of an instance's stream (see WatchInstance in api.proto)."""

    seq: int
    #: SNAPSHOT, STATE, TASK_STARTED, TASK_PROGRESS, TASK_COMPLETED, TASK_FAILED, …
    kind: str
    #: The instance state after the event.
    state: str
    task: str
    index: int
    attempt: int
    output: Any
    error: str
    progress: Optional[Progress]
    #: The whole instance, on SNAPSHOT events.
    instance: Optional[Instance]
    time: Optional[datetime.datetime]
    raw: api_pb2.Event = field(repr=False)

    @classmethod
    def _of(cls, e: api_pb2.Event) -> "Event":
        return cls(
            e.seq, str(api_pb2.EventKind.Name(e.kind)).removeprefix("EVENT_KIND_"), _state(e.state), e.task, e.index, e.attempt,
            _json(e.output_json), e.error, Progress._of(e.progress) if e.HasField("progress") else None,
            Instance._of(e.instance) if e.HasField("instance") else None, _time(e.time, e.HasField("time")), e,
        )


@dataclass
class LogLine:
    #: "stdout", "stderr" or "note" (a remark of the log itself).
    stream: str
    text: str
    time: Optional[datetime.datetime]
    #: The attempt and the node that ran it.
    attempt: int
    node: str


@dataclass
class SignalResult:
    seq: int
    duplicate: bool
    delivered: bool


@dataclass
class RetryResult:
    run: int
    tasks: List[str]


Spec = Union[str, bytes, "os.PathLike[str]", Any]


class Client:
    """A client of a robonode's WorkflowService.

    addr, tls_ca and token default to $ROBONET_ADDR (else
    127.0.0.1:7233), $ROBONET_TLS_CA and $ROBONET_TOKEN, as roboctl's.
    timeout bounds each call (not waiting).
    """

    def __init__(
        self,
        addr: Optional[str] = None,
        *,
        tls_ca: Optional[str] = None,
        token: Optional[str] = None,
        tls_server_name: Optional[str] = None,
        timeout: float = 30.0,
    ) -> None:
        self.addr, tls_ca, token = _conn.resolve(addr, tls_ca, token)
        self._channel, self._md = _conn.channel(self.addr, tls_ca, token, tls_server_name)
        self._stub = api_pb2_grpc.WorkflowServiceStub(self._channel)
        self.timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, req: Any, timeout: Optional[float] = None) -> Any:
        try:
            return getattr(self._stub, method)(req, timeout=timeout or self.timeout, metadata=self._md)
        except grpc.RpcError as e:
            raise from_rpc_error(e, method) from None

    # -- workflows

    def register(self, spec: Spec, filename: str = "") -> WorkflowInfo:
        """Registers a workflow version: YAML/JSON text, a file path, or a workflow object with to_yaml().

        filename names the spec in error messages (default: the path, or a name of its own).
        """
        inline = _inline(spec)
        if filename:
            inline.filename = filename
        resp = self._call("RegisterWorkflow", api_pb2.RegisterWorkflowRequest(spec=inline))
        return WorkflowInfo._of(resp.workflow)

    def workflows(self, name: str = "", limit: int = 0) -> List[WorkflowInfo]:
        resp = self._call("ListWorkflows", api_pb2.ListWorkflowsRequest(name=name, limit=limit))
        return [WorkflowInfo._of(w) for w in resp.workflows]

    # -- instances

    def submit(
        self,
        spec_or_name: Spec,
        inputs: Optional[Mapping[str, Any]] = None,
        *,
        version: int = 0,
        idempotency_key: str = "",
        deadline: Optional[float] = None,
        wait: bool = False,
        wait_timeout: Optional[float] = None,
    ) -> Submission:
        """Starts an instance of a registered workflow (by name, version 0: the latest)
        or of a spec (text, file path, or workflow object).

        With wait, returns once the instance finished (its final view in
        .instance) or raises TimeoutError after wait_timeout seconds.
        """
        req = api_pb2.SubmitWorkflowRequest(inputs_json=_inputs(inputs), idempotency_key=idempotency_key)
        _target(req, spec_or_name, version)
        if deadline:
            req.deadline.CopyFrom(_duration(deadline))
        resp = self._call("SubmitWorkflow", req)
        sub = Submission(resp.instance_id, resp.existing, WorkflowInfo._of(resp.workflow) if resp.HasField("workflow") else None,
                         list(resp.warnings))
        if wait:
            sub.instance = self.wait(sub.id, timeout=wait_timeout)
        return sub

    def submit_many(
        self,
        spec_or_name: Spec,
        inputs: Iterable[Optional[Mapping[str, Any]]],
        *,
        version: int = 0,
        idempotency_keys: Optional[Sequence[str]] = None,
    ) -> List[Submission]:
        """Starts one instance per inputs, 1,000 to a call (each call all or nothing)."""
        items = [api_pb2.SubmitItem(inputs_json=_inputs(i)) for i in inputs]
        if idempotency_keys is not None:
            if len(idempotency_keys) != len(items):
                raise ValueError(f"{len(idempotency_keys)} idempotency keys for {len(items)} inputs")
            for it, k in zip(items, idempotency_keys):
                it.idempotency_key = k
        out: List[Submission] = []
        for at in range(0, len(items), 1000):
            req = api_pb2.SubmitWorkflowsRequest(items=items[at:at + 1000])
            _target(req, spec_or_name, version)
            resp = self._call("SubmitWorkflows", req)
            wf = WorkflowInfo._of(resp.workflow) if resp.HasField("workflow") else None
            out.extend(Submission(s.instance_id, s.existing, wf, list(resp.warnings)) for s in resp.instances)
        return out

    def get(self, instance_id: str) -> Instance:
        return Instance._of(self._call("GetInstance", api_pb2.GetInstanceRequest(instance_id=instance_id)).instance)

    def list(
        self,
        workflow: str = "",
        states: Sequence[str] = (),
        *,
        id_prefix: str = "",
        limit: Optional[int] = None,
        page_size: int = 0,
    ) -> Iterator[InstanceSummary]:
        """Lists instances, newest first, fetching pages as it goes (up to limit)."""
        req = api_pb2.ListInstancesRequest(
            workflow=workflow, id_prefix=id_prefix, page_size=page_size,
            states=[api_pb2.InstanceState.Value("INSTANCE_STATE_" + s.upper()) for s in states],
        )
        n = 0
        while True:
            resp = self._call("ListInstances", req)
            for s in resp.instances:
                if limit is not None and n >= limit:
                    return
                n += 1
                yield InstanceSummary._of(s)
            if not resp.next_page_token:
                return
            req.page_token = resp.next_page_token

    def watch(self, instance_id: str, after_seq: int = 0, *, retry_for: float = 60.0) -> Iterator[Event]:
        """Yields the instance's events until it finishes.

        A broken stream is resumed after the last event seen (the node
        answers with a snapshot when it no longer has that point), with
        backoff, for up to retry_for seconds without an event.
        """
        seq = after_seq
        backoff = 0.1
        last_ok = time.monotonic()
        while True:
            try:
                stream = self._stub.WatchInstance(api_pb2.WatchInstanceRequest(instance_id=instance_id, after_seq=seq), metadata=self._md)
                for resp in stream:
                    e = resp.event
                    seq = max(seq, e.seq)
                    backoff, last_ok = 0.1, time.monotonic()
                    ev = Event._of(e)
                    yield ev
                    if ev.kind == "STATE" and ev.state in TERMINAL:
                        return
                return
            except grpc.RpcError as err:
                code = err.code() if isinstance(err, grpc.Call) else None
                if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN,
                                grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED) or time.monotonic() - last_ok > retry_for:
                    raise from_rpc_error(err, "WatchInstance") from None
            time.sleep(backoff / 2 + random.uniform(0, backoff / 2))
            backoff = min(backoff * 2, 5.0)

    def wait(self, instance_id: str, timeout: Optional[float] = None) -> Instance:
        """Waits until the instance finishes and returns it; TimeoutError after timeout seconds."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            inst = self.get(instance_id)
            if inst.done:
                return inst
            try:
                for ev in _until(self.watch(instance_id), end):
                    if ev.kind == "STATE" and ev.state in TERMINAL:
                        break
            except TimeoutError:
                raise TimeoutError(f"instance {instance_id} did not finish within {timeout}s") from None
            if end is not None and time.monotonic() >= end:
                raise TimeoutError(f"instance {instance_id} did not finish within {timeout}s")

    def cancel(self, instance_id: str) -> None:
        self._call("CancelInstance", api_pb2.CancelInstanceRequest(instance_id=instance_id))

    def signal(self, instance_id: str, name: str, payload: Any = None, *, idempotency_key: str = "") -> SignalResult:
        """Sends a named signal with a JSON payload to a live instance."""
        resp = self._call("SignalInstance", api_pb2.SignalInstanceRequest(
            instance_id=instance_id, name=name, payload_json=json.dumps(payload), idempotency_key=idempotency_key))
        return SignalResult(resp.seq, resp.duplicate, resp.delivered)

    def retry(self, instance_id: str, from_task: str = "") -> RetryResult:
        """Runs a FAILED or CANCELLED instance again from the tasks that did not complete (or from from_task)."""
        resp = self._call("RetryInstance", api_pb2.RetryInstanceRequest(instance_id=instance_id, from_task=from_task))
        return RetryResult(resp.run, list(resp.tasks))

    def pause(self, instance_id: str) -> None:
        self._call("PauseInstance", api_pb2.PauseInstanceRequest(instance_id=instance_id))

    def resume(self, instance_id: str) -> None:
        self._call("ResumeInstance", api_pb2.ResumeInstanceRequest(instance_id=instance_id))

    def publish(self, name: str, payload: Any = None, *, idempotency_key: str = "") -> List[str]:
        """Publishes an event; returns the ids of the instances it started."""
        resp = self._call("PublishEvent", api_pb2.PublishEventRequest(name=name, payload_json=json.dumps(payload), idempotency_key=idempotency_key))
        return [s.instance_id for s in resp.started]

    def logs(self, instance_id: str, task: str, attempt: int = 0, *, follow: bool = False) -> Iterator[LogLine]:
        """Yields the log lines of one attempt of a task ("name", "name[2]", "name#3"); attempt 0: the latest."""
        req = api_pb2.TaskLogsRequest(instance_id=instance_id, task=task, attempt=attempt, follow=follow)
        at, node = attempt, ""
        try:
            for resp in self._stub.TaskLogs(req, metadata=self._md):
                if resp.node:
                    at, node = resp.attempt, resp.node
                for ln in resp.lines:
                    yield LogLine(
                        str(api_pb2.LogStream.Name(ln.stream)).removeprefix("LOG_STREAM_").lower(),
                        ln.text.decode("utf-8", "replace"), _time(ln.time, ln.HasField("time")), at, node,
                    )
        except grpc.RpcError as e:
            raise from_rpc_error(e, "TaskLogs") from None


def _until(it: Iterator[T], end: Optional[float]) -> Iterator[T]:
    for x in it:
        yield x
        if end is not None and time.monotonic() >= end:
            raise TimeoutError()


def _inputs(inputs: Optional[Mapping[str, Any]]) -> str:
    return json.dumps(dict(inputs)) if inputs else ""


def _duration(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


def _inline(spec: Spec) -> api_pb2.InlineSpec:
    """A spec as InlineSpec: a workflow object (to_yaml), a file path, or the text itself."""
    to_yaml: Optional[Callable[[], str]] = getattr(spec, "to_yaml", None)
    if to_yaml is not None:
        return api_pb2.InlineSpec(source=to_yaml().encode(), filename=f"{getattr(spec, 'name', 'workflow')}.py")
    if isinstance(spec, bytes):
        return api_pb2.InlineSpec(source=spec, filename="spec.yaml")
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and "\n" not in spec and os.path.isfile(spec)):
        path = os.fspath(spec)
        with open(path, "rb") as f:
            return api_pb2.InlineSpec(source=f.read(), filename=path)
    if isinstance(spec, str):
        return api_pb2.InlineSpec(source=spec.encode(), filename="spec.yaml")
    raise TypeError(f"a spec is YAML text, a file path or a workflow object, not {type(spec).__name__}")


def _target(req: Any, spec_or_name: Spec, version: int) -> None:
    """Sets a submit request's workflow: a registered name, or an inline spec."""
    if isinstance(spec_or_name, str) and "\n" not in spec_or_name and ":" not in spec_or_name and not os.path.isfile(spec_or_name):
        req.ref.CopyFrom(api_pb2.WorkflowRef(name=spec_or_name, version=version))
    else:
        req.spec.CopyFrom(_inline(spec_or_name))


__all__ = [
    "Client", "Instance", "InstanceSummary", "Task", "Attempt", "Progress", "Event", "LogLine", "Submission",
    "WorkflowInfo", "SignalResult", "RetryResult", "RobonetError",
]
