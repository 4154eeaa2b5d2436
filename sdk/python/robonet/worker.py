"""Workers: a Python program that serves a capability's actions.

::

    from robonet import Worker

    w = Worker(capability="ai.inference", slots=4, name="summarizer")

    @w.action("summarize")
    def summarize(ctx, text: str, max_words: int = 50) -> dict:
        ctx.progress(done=1, total=3, message="tokenizing")
        ...
        return {"summary": ...}

    w.run("node:7233")

The worker speaks the WorkerService protocol (proto/robonet/v1/worker.proto)
with one robonode: it says what it serves, runs the attempts the node sends
it (up to ``slots`` at once) and answers each with its result, and beats
every interval the node announces from a thread of its own. A broken stream
is reconnected with backoff; what ran on it is cancelled here and moved to
another worker by the mesh. Dispatch is at-least-once: ``ctx.idempotency_key``
names the attempt across deliveries.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import inspect
import json
import logging
import os
import queue
import random
import re
import signal
import socket
import threading
import time
import traceback
from typing import Any, Callable, Dict, Iterator, List, Optional, TypeVar

import grpc

from robonet import _binding, _conn, _logs
from robonet._proto import worker_pb2, worker_pb2_grpc
from robonet.errors import ActionCancelled, RobonetError, WorkerRejectedError, from_rpc_error

log = logging.getLogger("robonet.worker")

F = TypeVar("F", bound=Callable[..., Any])

BACKOFF_MIN = 0.1
BACKOFF_MAX = 5.0
TICK = 0.1  # how often logs are sent and deadlines checked
_CLOSE = object()
_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class Context:
    """What an action knows of its attempt, and how it reports back.

    Passed as the first argument of every action. ``progress`` and
    ``cancelled`` are safe from any thread.
    """

    def __init__(self, run: worker_pb2.WorkerRun, node: str, worker: str) -> None:
        self.action: str = run.action
        self.workflow: str = run.workflow
        self.task: str = run.task
        #: Spread index (or loop iteration); -1 for a plain task.
        self.index: int = run.index
        self.attempt: int = run.attempt
        #: Names the attempt across deliveries and nodes: deduplicate side effects with it.
        self.idempotency_key: str = run.idempotency_key
        self.slot: int = run.slot
        self.attempt_id: str = run.attempt_id
        #: The robonode the worker is connected to.
        self.node: str = node
        self.worker: str = worker
        #: time.monotonic() at which the attempt times out; None: no timeout.
        self._timeout = run.timeout_ns / 1e9
        self.deadline: Optional[float] = time.monotonic() + self._timeout if run.timeout_ns > 0 else None
        #: A logger for the action; what it logs reaches ``roboctl logs`` (as does any logging inside the action).
        self.logger: logging.Logger = logging.getLogger(f"robonet.action.{run.action}")
        self._mu = threading.Lock()
        self._done = 0
        self._total = 0
        self._message = ""
        self._cancel = threading.Event()
        self._reason = ""
        self._on_cancel: List[Callable[[], None]] = []

    def progress(self, done: Optional[int] = None, total: Optional[int] = None, message: Optional[str] = None) -> None:
        """Reports how far the attempt has come (total 0: unknown); the latest report rides the next beat.

        Raises :class:`ActionCancelled` once the attempt was cancelled or timed out.
        """
        with self._mu:
            if done is not None:
                self._done = int(done)
            if total is not None:
                self._total = int(total)
            if message is not None:
                self._message = str(message)[:1024]
        self.check()

    def cancelled(self) -> bool:
        """Whether the attempt was cancelled, timed out, or its node went away: stop as soon as you can."""
        if not self._cancel.is_set() and self.deadline is not None and time.monotonic() >= self.deadline:
            self._set_cancelled("timed out")
        return self._cancel.is_set()

    @property
    def cancel_reason(self) -> str:
        """Why the attempt was stopped: "cancelled", "timed out", "disconnected" or "shutting down"; empty while it runs."""
        return self._reason

    def check(self) -> None:
        """Raises :class:`ActionCancelled` if the attempt was cancelled or timed out."""
        if self.cancelled():
            raise ActionCancelled(f"attempt {self.task or self.action} {self._reason}")

    def sleep(self, seconds: float) -> None:
        """Sleeps, waking early and raising :class:`ActionCancelled` when the attempt is cancelled."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if self.deadline is not None:
                left = min(left, self.deadline - time.monotonic())
            if left <= 0 or self._cancel.wait(left):
                break
        self.check()

    def time_left(self) -> Optional[float]:
        """Seconds until the attempt times out; None without a timeout."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def _set_cancelled(self, reason: str) -> None:
        with self._mu:
            if self._cancel.is_set():
                return
            self._reason = reason
            self._cancel.set()
            hooks, self._on_cancel = self._on_cancel, []
        for h in hooks:
            try:
                h()
            except Exception:  # noqa: BLE001 - a hook must not stop the others
                log.debug("cancel hook failed", exc_info=True)

    def _snapshot(self) -> worker_pb2.SlotProgress:
        with self._mu:
            return worker_pb2.SlotProgress(
                slot=self.slot, attempt_id=self.attempt_id, steps_done=self._done, steps_total=self._total, message=self._message
            )


@dataclasses.dataclass
class _Action:
    name: str
    fn: Callable[..., Any]
    sig: _binding.Signature
    is_async: bool


class _Attempt:
    def __init__(self, ctx: Context, action: Optional[_Action], input_json: bytes, session: "_Session") -> None:
        self.ctx = ctx
        self.action = action
        self.input_json = input_json
        self.session = session
        self.log = _logs.AttemptLog(ctx.slot, ctx.attempt_id)
        self.future: Optional["concurrent.futures.Future[Any]"] = None


class Worker:
    """A program serving one capability's actions with ``slots`` attempts at once.

    name identifies the program on the node (letters, digits, '.', '_',
    '-'; at most 64 bytes); two programs on the same node serving the same
    capability need different names. The default is the capability with
    this host and process id.
    """

    def __init__(
        self,
        capability: str,
        slots: int = 1,
        name: Optional[str] = None,
        *,
        shutdown_timeout: float = 30.0,
        log_level: int = logging.INFO,
        capture_logs: bool = True,
    ) -> None:
        if not capability:
            raise ValueError("capability is empty: name the capability served, e.g. ai.inference")
        if not 1 <= slots <= 1024:
            raise ValueError(f"slots {slots} must be 1..1024")
        if name is None:
            name = re.sub(r"[^A-Za-z0-9._-]", "-", f"{capability}-{socket.gethostname()}-{os.getpid()}")[:64]
        if not _NAME_RE.match(name):
            raise ValueError(f"name {name!r}: use 1..64 letters, digits, '.', '_' or '-'")
        self.capability = capability
        self.slots = slots
        self.name = name
        #: How long SIGTERM (or stop()) waits for running attempts before handing them back.
        self.shutdown_timeout = shutdown_timeout
        self.log_level = log_level
        self.capture_logs = capture_logs
        #: Called with the node's name each time a session starts.
        self.on_connect: Optional[Callable[[str], None]] = None
        self._actions: Dict[str, _Action] = {}
        self._mu = threading.Lock()
        self._stop = threading.Event()
        self._grace_until: Optional[float] = None
        self._session: Optional[_Session] = None
        self._send_logs = True
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._own_loop: Optional[threading.Thread] = None
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        #: Set while a session is open (the node welcomed the worker).
        self.connected = threading.Event()
        self.node = ""

    # -- actions

    def action(self, name: Optional[str] = None) -> Callable[[F], F]:
        """Registers the decorated function as the action name (default: the function's name).

        The function takes the :class:`Context` first, then the task's
        inputs (its ``with:``) as keyword arguments: missing, unknown or
        mistyped ones fail the attempt with a message saying which. It
        may be ``async def``. What it returns is the task's output (JSON:
        dicts, lists, str, int, float, bool, None, dataclasses).
        """

        def register(fn: F) -> F:
            n = name or fn.__name__
            if n in self._actions:
                raise ValueError(f"action {n} is registered twice")
            if len(n.encode()) > 128:
                raise ValueError(f"action {n[:32]}… is longer than 128 bytes")
            self._actions[n] = _Action(n, fn, _binding.inspect_action(n, fn), inspect.iscoroutinefunction(fn))
            return fn

        return register

    @property
    def actions(self) -> List[str]:
        return sorted(self._actions)

    @property
    def logs_supported(self) -> bool:
        """False once a node refused WorkerLog (an older robonode): action output then stays with the program."""
        return self._send_logs

    # -- running

    def run(
        self,
        addr: Optional[str] = None,
        *,
        tls_ca: Optional[str] = None,
        token: Optional[str] = None,
        tls_server_name: Optional[str] = None,
        handle_signals: bool = True,
    ) -> None:
        """Serves until stop() or SIGTERM/SIGINT; reconnects with backoff when the node goes away.

        addr, tls_ca and token default to $ROBONET_ADDR, $ROBONET_TLS_CA
        and $ROBONET_TOKEN. The first SIGTERM (or SIGINT) lets running
        attempts finish for shutdown_timeout, then hands back what still
        runs; a second one hands it back at once. Raises
        WorkerRejectedError when the node refuses the hello.
        """
        restore: Dict[signal.Signals, Any] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                restore[sig] = signal.signal(sig, lambda signum, frame: self._on_signal())
        loop_thread: Optional[threading.Thread] = None
        if any(a.is_async for a in self._actions.values()):
            loop = asyncio.new_event_loop()
            loop_thread = threading.Thread(target=loop.run_forever, name="robonet-actions-loop", daemon=True)
            loop_thread.start()
            self._loop = loop
        try:
            self._serve(addr, tls_ca, token, tls_server_name)
        finally:
            for sig, h in restore.items():
                signal.signal(sig, h)
            if loop_thread is not None and self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                loop_thread.join(5)
                self._loop = None

    async def run_async(
        self,
        addr: Optional[str] = None,
        *,
        tls_ca: Optional[str] = None,
        token: Optional[str] = None,
        tls_server_name: Optional[str] = None,
        handle_signals: bool = True,
    ) -> None:
        """run(), for asyncio programs: ``async def`` actions run on the calling loop.

        Cancelling the awaiting task hands back what runs and returns.
        """
        loop = asyncio.get_running_loop()
        self._loop = loop
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, self._on_signal)
                except (NotImplementedError, RuntimeError):
                    pass
        done: "asyncio.Future[None]" = loop.create_future()

        def serve() -> None:
            try:
                self._serve(addr, tls_ca, token, tls_server_name)
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
                err = e
                loop.call_soon_threadsafe(_settle, done, err)
            else:
                loop.call_soon_threadsafe(_settle, done, None)

        t = threading.Thread(target=serve, name="robonet-worker", daemon=True)
        t.start()
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            self.stop(grace=0)
            await asyncio.get_running_loop().run_in_executor(None, t.join)
            raise
        finally:
            if handle_signals and threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGTERM, signal.SIGINT):
                    try:
                        loop.remove_signal_handler(sig)
                    except (NotImplementedError, RuntimeError):
                        pass
            self._loop = None

    def stop(self, grace: Optional[float] = None) -> None:
        """Asks the worker to stop: running attempts may finish for grace seconds
        (default shutdown_timeout), then what still runs is handed back to the
        node, which moves it to another worker. Safe from any thread."""
        if grace is None:
            grace = self.shutdown_timeout
        with self._mu:
            until = time.monotonic() + grace
            if self._grace_until is None or until < self._grace_until:
                self._grace_until = until
            self._stop.set()

    def _on_signal(self) -> None:
        if self._stop.is_set():
            log.info("second signal: handing back what runs")
            self.stop(grace=0)
        else:
            log.info("stopping: letting running attempts finish (up to %.0fs)", self.shutdown_timeout)
            self.stop()

    def _serve(self, addr: Optional[str], tls_ca: Optional[str], token: Optional[str], tls_server_name: Optional[str]) -> None:
        if not self._actions:
            raise ValueError("the worker serves no action: register one with @worker.action()")
        addr, tls_ca, token = _conn.resolve(addr, tls_ca, token)
        if self.capture_logs:
            _logs.install(self.log_level)
        ch, md = _conn.channel(addr, tls_ca, token, tls_server_name)
        stub = worker_pb2_grpc.WorkerServiceStub(ch)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix=f"robonet-{self.name}")
        backoff = BACKOFF_MIN
        try:
            while not self._stop.is_set():
                s = _Session(self, stub, md)
                with self._mu:
                    self._session = s
                err = s.run()
                with self._mu:
                    self._session = None
                if self._stop.is_set():
                    return
                code = err.code() if isinstance(err, grpc.Call) else None
                if code == grpc.StatusCode.INVALID_ARGUMENT:
                    msg = err.details() if isinstance(err, grpc.Call) else str(err)
                    if s.welcomed and s.sent_logs and self._send_logs:
                        log.warning("node %s does not take WorkerLog (an older robonode): action output stays with this program", s.node)
                        self._send_logs = False
                        continue
                    raise WorkerRejectedError(f"the node rejected worker {self.name}: {msg}")
                if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED) and isinstance(err, grpc.RpcError):
                    raise from_rpc_error(err, "WorkerService.Serve")
                if s.welcomed:
                    backoff = BACKOFF_MIN
                wait = backoff / 2 + random.uniform(0, backoff / 2)
                log.info("session with %s ended (%s); connecting again in %.2fs", addr, _short(err), wait)
                if self._stop.wait(wait):
                    return
                backoff = min(2 * backoff, BACKOFF_MAX)
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            ch.close()

    def _session_stopping(self) -> bool:
        return self._stop.is_set()

    def _grace_over(self) -> bool:
        with self._mu:
            return self._grace_until is not None and time.monotonic() >= self._grace_until


def _settle(f: "asyncio.Future[None]", err: Optional[BaseException]) -> None:
    if f.done():
        return
    if err is None:
        f.set_result(None)
    else:
        f.set_exception(err)


def _short(err: Optional[BaseException]) -> str:
    if err is None:
        return "closed"
    if isinstance(err, grpc.Call):
        return f"{err.code().name}: {err.details()}"
    return str(err)


class _Session:
    """One Serve stream and the attempts that run on it."""

    def __init__(self, w: Worker, stub: Any, md: _conn.Metadata) -> None:
        self.w = w
        self.stub = stub
        self.md = md
        self.out: "queue.SimpleQueue[object]" = queue.SimpleQueue()
        self.mu = threading.Lock()
        self.running: Dict[str, _Attempt] = {}
        self.welcomed = False
        self.sent_logs = False
        self.closed = threading.Event()
        self.node = ""
        self.interval = 1.0
        self.last_done = 0.0

    def requests(self) -> Iterator[worker_pb2.ServeRequest]:
        hello = worker_pb2.WorkerHello(name=self.w.name, capability=self.w.capability, actions=self.w.actions, slots=self.w.slots)
        yield worker_pb2.ServeRequest(hello=hello)
        while True:
            m = self.out.get()
            if m is _CLOSE:
                return
            assert isinstance(m, worker_pb2.ServeRequest)
            yield m

    def send(self, m: worker_pb2.ServeRequest) -> None:
        if not self.closed.is_set():
            self.out.put(m)

    def run(self) -> Optional[BaseException]:
        """Runs the stream until it ends; returns why (None: closed by us)."""
        call = self.stub.Serve(self.requests(), metadata=self.md)
        ticker: Optional[threading.Thread] = None
        try:
            for resp in call:
                kind = resp.WhichOneof("msg")
                if kind == "run":
                    self.start(resp.run)
                elif kind == "cancel":
                    self.cancel(resp.cancel.attempt_id)
                elif kind == "welcome" and not self.welcomed:
                    self.welcomed = True
                    self.node = resp.welcome.node
                    if resp.welcome.heartbeat_interval_ns > 0:
                        self.interval = resp.welcome.heartbeat_interval_ns / 1e9
                    self.w.node = self.node
                    self.w.connected.set()
                    log.info("worker %s serving %s %s on %s (heartbeat every %.3gs)", self.w.name, self.w.capability, self.w.actions, self.node, self.interval)
                    ticker = threading.Thread(target=self.tick, args=(call,), name="robonet-beat", daemon=True)
                    ticker.start()
                    if self.w.on_connect is not None:
                        self.w.on_connect(self.node)
            return None
        except grpc.RpcError as e:
            err: BaseException = e
            return err
        finally:
            self.w.connected.clear()
            self.closed.set()
            self.out.put(_CLOSE)
            with self.mu:
                running = list(self.running.values())
                self.running.clear()
            reason = "shutting down" if self.w._session_stopping() else "disconnected"
            for a in running:
                self.stop_attempt(a, reason)
            if ticker is not None:
                ticker.join(2)

    def tick(self, call: Any) -> None:
        """Beats every interval and sends logs every TICK, from a thread of its own; ends the session when stopping."""
        next_beat = time.monotonic()
        closing_at: Optional[float] = None
        while not self.closed.wait(TICK):
            now = time.monotonic()
            with self.mu:
                running = list(self.running.values())
            for a in running:
                if a.ctx.deadline is not None and now >= a.ctx.deadline and not a.ctx._cancel.is_set():
                    self.stop_attempt(a, "timed out")
                self.flush_logs(a, final=False)
            if now >= next_beat:
                beat = worker_pb2.WorkerBeat(running=[a.ctx._snapshot() for a in running])
                self.send(worker_pb2.ServeRequest(beat=beat))
                next_beat = now + self.interval
            if self.w._session_stopping():
                # A result is given the node a beat to take in before the
                # goodbye: a node that reads both at once may drop it.
                settled = now - self.last_done >= max(self.interval, 0.2)
                if closing_at is None and ((not running and settled) or self.w._grace_over()):
                    # Ending the request stream says goodbye: the node hands
                    # what still runs here to other workers.
                    self.out.put(_CLOSE)
                    closing_at = now
                elif closing_at is not None and now - closing_at > 2:
                    call.cancel()
                    return

    def flush_logs(self, a: _Attempt, final: bool) -> None:
        if not self.w._send_logs:
            return
        msgs = a.log.drain(final)
        if msgs:
            self.sent_logs = True
            for m in msgs:
                self.send(m)

    def start(self, run: worker_pb2.WorkerRun) -> None:
        if self.w._session_stopping():
            return  # handed back when the stream closes
        ctx = Context(run, self.node, self.w.name)
        a = _Attempt(ctx, self.w._actions.get(run.action), run.input_json, self)
        with self.mu:
            self.running[run.attempt_id] = a
        if a.action is not None and a.action.is_async:
            loop = self.w._loop
            assert loop is not None
            fut = asyncio.run_coroutine_threadsafe(self.invoke_async(a), loop)
            a.future = fut
            ctx._on_cancel.append(lambda: None if fut.cancel() else None)
            fut.add_done_callback(lambda f: self.finish_async(a, f))
        else:
            pool = self.w._pool
            assert pool is not None
            pool.submit(self.invoke_sync, a)

    def cancel(self, attempt_id: str) -> None:
        with self.mu:
            a = self.running.get(attempt_id)
        if a is None:
            return
        # The node times an attempt out from its dispatch, a little before
        # it arrived here: a cancel close to the deadline is the timeout.
        reason = "cancelled"
        left = a.ctx.time_left()
        if left is not None and a.ctx._timeout > 0 and left <= min(0.5, 0.1 * a.ctx._timeout):
            reason = "timed out"
        self.stop_attempt(a, reason)

    def stop_attempt(self, a: _Attempt, reason: str) -> None:
        a.ctx._set_cancelled(reason)

    # -- invoking

    def capture(self, a: _Attempt) -> Optional[_logs.AttemptLog]:
        """The log an attempt's prints and logging go to (None: not captured)."""
        if not (self.w._send_logs and self.w.capture_logs):
            return None
        _logs.route_streams()
        return a.log

    def invoke_sync(self, a: _Attempt) -> None:
        token = _logs.current.set(self.capture(a))
        try:
            done = self.call(a)
        finally:
            _logs.current.reset(token)
        self.finish(a, done)

    def call(self, a: _Attempt) -> worker_pb2.WorkerDone:
        if a.action is None:
            return worker_pb2.WorkerDone(error=f"worker {self.w.name} has no action {a.ctx.action!r} (it serves {', '.join(self.w.actions)})")
        try:
            kwargs = _binding.bind(a.action.sig, json.loads(a.input_json) if a.input_json else None)
        except (_binding.BindError, ValueError) as e:
            return worker_pb2.WorkerDone(error=str(e))
        try:
            out = a.action.fn(a.ctx, **kwargs)
        except BaseException as e:  # noqa: BLE001 - every failure is the attempt's
            return self.failed(a, e)
        return self.output(a, out)

    async def invoke_async(self, a: _Attempt) -> worker_pb2.WorkerDone:
        _logs.current.set(self.capture(a))
        if a.action is None:
            return self.call(a)
        try:
            kwargs = _binding.bind(a.action.sig, json.loads(a.input_json) if a.input_json else None)
        except (_binding.BindError, ValueError) as e:
            return worker_pb2.WorkerDone(error=str(e))
        try:
            out = await a.action.fn(a.ctx, **kwargs)
        except asyncio.CancelledError as e:
            return self.failed(a, ActionCancelled(f"attempt {a.ctx.task or a.ctx.action} {a.ctx.cancel_reason or 'cancelled'}") if a.ctx.cancelled() else e)
        except BaseException as e:  # noqa: BLE001
            return self.failed(a, e)
        return self.output(a, out)

    def finish_async(self, a: _Attempt, f: "concurrent.futures.Future[Any]") -> None:
        if f.cancelled():
            done = worker_pb2.WorkerDone(error=f"ActionCancelled: attempt {a.ctx.cancel_reason or 'cancelled'}")
        else:
            exc = f.exception()
            done = f.result() if exc is None else self.failed(a, exc)
        self.finish(a, done)

    def failed(self, a: _Attempt, e: BaseException) -> worker_pb2.WorkerDone:
        msg = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        tb = traceback.extract_tb(e.__traceback__)
        frames = [f for f in tb if not f.filename.endswith(("robonet/worker.py",))]
        if frames:
            f = frames[-1]
            msg += f" (at {os.path.basename(f.filename)}:{f.lineno} in {f.name})"
        if not isinstance(e, ActionCancelled):
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            a.log.line("stderr", text.rstrip("\n"))
            if not self.w._send_logs or not self.w.capture_logs:
                log.warning("action %s failed:\n%s", a.ctx.action, text)
        return worker_pb2.WorkerDone(error=msg)

    def output(self, a: _Attempt, out: Any) -> worker_pb2.WorkerDone:
        try:
            data = json.dumps(out, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_json_default).encode()
        except (TypeError, ValueError) as e:
            return worker_pb2.WorkerDone(error=f"the output of action {a.ctx.action} is not JSON: {e}")
        return worker_pb2.WorkerDone(ok=True, output_json=data)

    def finish(self, a: _Attempt, done: worker_pb2.WorkerDone) -> None:
        with self.mu:
            mine = self.running.pop(a.ctx.attempt_id, None) is a
        if not mine or self.closed.is_set():
            return  # cancelled with the stream: nobody reads the result
        self.flush_logs(a, final=True)
        done.slot, done.attempt_id = a.ctx.slot, a.ctx.attempt_id
        self.send(worker_pb2.ServeRequest(done=done))
        self.last_done = time.monotonic()


def _json_default(o: Any) -> Any:
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


__all__ = ["Worker", "Context", "ActionCancelled", "WorkerRejectedError", "RobonetError"]
