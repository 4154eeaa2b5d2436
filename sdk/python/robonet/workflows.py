"""Workflows written in Python, compiled to the YAML spec of docs/workflows.md.

A workflow built here is a plain description: ``to_yaml()`` writes the same
spec a person would write by hand, and ``register(client)`` hands that text
to the mesh, which compiles it exactly as it compiles a YAML file (so
``roboctl validate`` accepts what ``to_yaml()`` writes, with the same IR
hash as the equivalent hand-written spec)::

    from robonet.workflows import workflow, task, inputs

    with workflow("scan-and-summarize", version=1) as wf:
        hosts = task("discover", capability="net.scan", action="exec",
                     with_={"argv": ["scan", inputs.targets]})
        probes = task("probe", capability="net.scan", action="http",
                      spread=hosts.output.hosts,
                      with_={"url": f"http://{wf.item}/health"}, on_failure="skip")
        task("summarize", capability="ai.inference", action="summarize",
             with_={"text": probes.output})
    wf.register(client)        # or wf.to_yaml()

**References.** ``inputs.NAME``, ``TASK.output`` (and ``tasks.NAME.output``),
``item``, ``index``, ``iteration``, ``previous`` and ``output`` are
:class:`Ref` objects: selecting a field (``.hosts``), indexing (``[0]``,
``["key"]``) or calling a method (``.map(expr("v"), expr("v.vote"))``) makes
another one. Used as a value a reference becomes the expression
``"${{ tasks.discover.output.hosts }}"`` (the expression's value, of
whatever type); inside an f-string or ``str()`` it renders the same text, so
``f"http://{wf.item}/health"`` is the interpolation
``"http://${{ item }}/health"``. Comparisons and arithmetic build CEL
(``size(probes.output) > 0``, ``(a == 1) & (b < 2)``, ``~flag``); any CEL
can be written with :func:`expr`, which also accepts ``${{ … }}`` pieces
(``expr(f"size({probes.output}) > 0")``). Python values become YAML values.

**Dependencies.** A task needs every task its expressions read (``with_``,
``when``, ``spread``, ``accept``, ``loop``, ``wait``), except one that is
already upstream of another of its needs (as a hand-written spec says
``needs: [approve]`` for a task that also reads ``plan``, upstream of
``approve``); a task with a ``join`` needs every task it reads (its needs
are what the join counts). ``needs=`` adds needs of its own, kept as given.

**Inputs.** ``wf.input("depth", "int", default=2)`` (or ``workflow(...,
inputs={...})``) declares an input; an input that is read but not declared
is declared as a required input of type ``any``.
"""

from __future__ import annotations

import contextvars
import datetime
import json
import math
import re
from typing import (
    Any,
    Dict,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
)

__all__ = [
    "Ref",
    "Task",
    "Workflow",
    "workflow",
    "task",
    "expr",
    "size",
    "has",
    "call",
    "cond",
    "inputs",
    "tasks",
    "item",
    "index",
    "iteration",
    "previous",
    "output",
    "until",
    "over",
    "wait_signal",
    "wait_for",
    "wait_until",
    "retry_policy",
    "duration",
    "dump_yaml",
]

OnFailure = Literal["retry", "skip", "abort"]
InputType = Literal["any", "string", "int", "number", "bool", "list", "map"]
#: A duration: Go syntax ("30s", "1h30m"), a timedelta, or seconds.
Duration = Union[str, datetime.timedelta, int, float]

_IDENT_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_WORKFLOW_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_ATOMIC_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
# CEL's precedence, loosest first; an expression of unknown shape (expr())
# is parenthesised wherever it is an operand.
_PREC_UNKNOWN, _PREC_COND, _PREC_OR, _PREC_AND, _PREC_REL, _PREC_ADD, _PREC_MUL, _PREC_UNARY, _PREC_ATOM = range(9)
_BINARY_PREC = {
    "||": _PREC_OR, "&&": _PREC_AND,
    "==": _PREC_REL, "!=": _PREC_REL, "<": _PREC_REL, "<=": _PREC_REL, ">": _PREC_REL, ">=": _PREC_REL,
    "+": _PREC_ADD, "-": _PREC_ADD, "*": _PREC_MUL, "/": _PREC_MUL, "%": _PREC_MUL,
}
_EXPR_RE = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_TASK_REF_RE = re.compile(r"(?<![A-Za-z0-9_.])tasks\s*\.\s*([a-z_][a-z0-9_]*)")
_INPUT_REF_RE = re.compile(r"(?<![A-Za-z0-9_.])inputs\s*\.\s*([a-z_][a-z0-9_]*)")
_INPUT_TYPES = ("any", "string", "int", "number", "bool", "list", "map")
_PY_TYPES: Dict[type, str] = {
    str: "string",
    int: "int",
    float: "number",
    bool: "bool",
    list: "list",
    dict: "map",
    object: "any",
}


# --------------------------------------------------------------------------
# Expressions


class Ref:
    """A CEL expression, rendered ``${{ … }}`` where a value or text is wanted.

    ``ref.field``, ``ref[key]`` and ``ref.method(args…)`` build larger
    expressions; so do the comparison, arithmetic and ``& | ~`` operators.
    A Ref has no Python truth value (use ``&``, ``|`` and ``~`` rather than
    ``and``, ``or`` and ``not``, and parenthesise comparisons around them:
    ``(a > 1) & (b < 2)``).
    """

    __slots__ = ("_src", "_prec")

    _src: str
    _prec: int  # how tightly the expression binds: _PREC_* below

    def __init__(self, source: str, *, prec: Optional[int] = None) -> None:
        source = source.strip()
        if not source:
            raise ValueError("an expression cannot be empty")
        object.__setattr__(self, "_src", source)
        if prec is None:
            prec = _PREC_ATOM if _ATOMIC_RE.match(source) else _PREC_UNKNOWN
        object.__setattr__(self, "_prec", prec)

    def _operand(self, prec: int = _PREC_ATOM, strict: bool = False) -> str:
        """The source as an operand of an operator of precedence prec (strict: the right of a left-associative one)."""
        if self._prec > prec or (self._prec == prec and not strict):
            return self._src
        return "(" + self._src + ")"

    def __str__(self) -> str:
        return "${{ " + self._src + " }}"

    def __format__(self, spec: str) -> str:
        if spec:
            raise ValueError(
                f"a workflow expression takes no format spec ({spec!r}): "
                f"format it in CEL, e.g. expr('string(x)')"
            )
        return str(self)

    def __repr__(self) -> str:
        return f"Ref({self._src!r})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a Ref is immutable")

    def __getattr__(self, name: str) -> Ref:
        if name.startswith("_"):
            raise AttributeError(name)
        return Ref(self._operand() + "." + name, prec=_PREC_ATOM)

    def __getitem__(self, key: object) -> Ref:
        return Ref(self._operand() + "[" + _cel(key) + "]", prec=_PREC_ATOM)

    def __call__(self, *args: object) -> Ref:
        return Ref(self._operand() + "(" + ", ".join(_cel(a) for a in args) + ")", prec=_PREC_ATOM)

    def __iter__(self) -> Iterator[Any]:
        raise TypeError("a workflow expression cannot be iterated in Python; use spread= or loop=")

    def __bool__(self) -> bool:
        raise TypeError(
            "a workflow expression has no truth value in Python: it is evaluated by the engine; "
            "combine expressions with &, | and ~ (not and, or, not)"
        )

    def __hash__(self) -> int:
        return id(self)

    def _binary(self, op: str, other: object, reverse: bool = False) -> Ref:
        prec = _BINARY_PREC[op]
        left, right = (other, self) if reverse else (self, other)
        return Ref(f"{_cel_operand(left, prec)} {op} {_cel_operand(right, prec, strict=True)}", prec=prec)

    def __eq__(self, other: object) -> Ref:  # type: ignore[override]
        return self._binary("==", other)

    def __ne__(self, other: object) -> Ref:  # type: ignore[override]
        return self._binary("!=", other)

    def __lt__(self, other: object) -> Ref:
        return self._binary("<", other)

    def __le__(self, other: object) -> Ref:
        return self._binary("<=", other)

    def __gt__(self, other: object) -> Ref:
        return self._binary(">", other)

    def __ge__(self, other: object) -> Ref:
        return self._binary(">=", other)

    def __add__(self, other: object) -> Ref:
        return self._binary("+", other)

    def __radd__(self, other: object) -> Ref:
        return self._binary("+", other, reverse=True)

    def __sub__(self, other: object) -> Ref:
        return self._binary("-", other)

    def __rsub__(self, other: object) -> Ref:
        return self._binary("-", other, reverse=True)

    def __mul__(self, other: object) -> Ref:
        return self._binary("*", other)

    def __rmul__(self, other: object) -> Ref:
        return self._binary("*", other, reverse=True)

    def __truediv__(self, other: object) -> Ref:
        return self._binary("/", other)

    def __rtruediv__(self, other: object) -> Ref:
        return self._binary("/", other, reverse=True)

    def __mod__(self, other: object) -> Ref:
        return self._binary("%", other)

    def __rmod__(self, other: object) -> Ref:
        return self._binary("%", other, reverse=True)

    def __and__(self, other: object) -> Ref:
        return self._binary("&&", other)

    def __rand__(self, other: object) -> Ref:
        return self._binary("&&", other, reverse=True)

    def __or__(self, other: object) -> Ref:
        return self._binary("||", other)

    def __ror__(self, other: object) -> Ref:
        return self._binary("||", other, reverse=True)

    def __invert__(self) -> Ref:
        return Ref("!" + self._operand(_PREC_UNARY, strict=True), prec=_PREC_UNARY)

    def __neg__(self) -> Ref:
        return Ref("-" + self._operand(_PREC_UNARY, strict=True), prec=_PREC_UNARY)


class _Namespace:
    """``inputs`` and ``tasks``: ``inputs.targets`` is ``Ref("inputs.targets")``."""

    __slots__ = ("_prefix",)

    _prefix: str

    def __init__(self, prefix: str) -> None:
        object.__setattr__(self, "_prefix", prefix)

    def __getattr__(self, name: str) -> Ref:
        if name.startswith("_"):
            raise AttributeError(name)
        return Ref(self._prefix + "." + name, prec=_PREC_ATOM)

    def __getitem__(self, name: str) -> Ref:
        return self.__getattr__(name)

    def __repr__(self) -> str:
        return f"<{self._prefix}>"


#: ``inputs.NAME``: a workflow input.
inputs = _Namespace("inputs")
#: ``tasks.NAME.output``: a task's output by name (``TASK.output`` is the same).
tasks = _Namespace("tasks")
#: The element of a spread (or of a loop over a list), or the node's name under ``on="every_node"``.
item = Ref("item")
#: The element's position in a spread (or the node's under ``on="every_node"``).
index = Ref("index")
#: A loop's 0-based iteration.
iteration = Ref("iteration")
#: The output of a loop's iteration before (null at iteration 0).
previous = Ref("previous")
#: The output being judged, in ``accept`` and in a loop's ``until``.
output = Ref("output")


def expr(text: str) -> Ref:
    """Any CEL expression: ``expr("size(tasks.probe.output) > 0")``.

    ``${{ … }}`` pieces (what a Ref renders in an f-string) are unwrapped, so
    ``expr(f"size({probes.output}) > 0")`` is the same expression, and
    ``expr("${{ inputs.x }}")`` is ``inputs.x``.
    """
    text = text.strip()
    whole = _EXPR_RE.fullmatch(text)
    if whole is not None and "${{" not in whole.group(1):
        return Ref(whole.group(1))
    def unwrap(m: re.Match[str]) -> str:
        inner = m.group(1).strip()
        return inner if _ATOMIC_RE.match(inner) else "(" + inner + ")"

    return Ref(_EXPR_RE.sub(unwrap, text))


def call(function: str, *args: object) -> Ref:
    """A CEL function call: ``call("string", inputs.count)`` is ``string(inputs.count)``."""
    return Ref(function + "(" + ", ".join(_cel(a) for a in args) + ")", prec=_PREC_ATOM)


def size(value: object) -> Ref:
    """CEL ``size(value)``: the length of a list, map or string."""
    return call("size", value)


def has(selector: Ref) -> Ref:
    """CEL ``has(x.field)``: whether a map has the field."""
    return call("has", selector)


def cond(condition: object, then: object, otherwise: object) -> Ref:
    """CEL ``condition ? then : otherwise``."""
    return Ref(
        f"{_cel_operand(condition, _PREC_COND, strict=True)} ? {_cel_operand(then, _PREC_COND, strict=True)}"
        f" : {_cel_operand(otherwise, _PREC_COND, strict=True)}",
        prec=_PREC_COND,
    )


def _cel_string(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _cel(value: object) -> str:
    """A Python value as CEL source."""
    if isinstance(value, Ref):
        return value._src
    if isinstance(value, Task):
        raise TypeError(f"use {value.name}.output to read task {value.name!r}, not the task itself")
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} has no CEL literal")
        return repr(value)
    if isinstance(value, str):
        return _cel_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_cel(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(_cel(k) + ": " + _cel(v) for k, v in value.items()) + "}"
    raise TypeError(f"{type(value).__name__} has no CEL literal: {value!r}")


def _cel_operand(value: object, prec: int = _PREC_ATOM, strict: bool = False) -> str:
    if isinstance(value, Ref):
        return value._operand(prec, strict)
    return _cel(value)


# --------------------------------------------------------------------------
# Values


def duration(value: Duration) -> str:
    """A duration in Go syntax: ``timedelta(minutes=1, seconds=30)`` is ``"1m30s"``, ``2.5`` is ``"2.5s"``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise TypeError("a duration is a string, a timedelta or a number of seconds, not a bool")
    if isinstance(value, datetime.timedelta):
        micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    elif isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a duration")
        micros = round(value * 1_000_000)
    else:
        raise TypeError(f"a duration is a string, a timedelta or a number of seconds, not {value!r}")
    if micros < 0:
        raise ValueError(f"a duration cannot be negative: {value!r}")
    if micros == 0:
        return "0s"
    if micros < 1_000_000:
        return f"{micros // 1000}ms" if micros % 1000 == 0 else f"{micros}us"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    secs, frac = divmod(rest, 1_000_000)
    out = ""
    if hours:
        out += f"{hours}h"
    if minutes:
        out += f"{minutes}m"
    if secs or frac:
        out += str(secs)
        if frac:
            out += ("." + f"{frac:06d}").rstrip("0")
        out += "s"
    return out


def _value(value: object, where: str) -> Any:
    """A Python value as the spec's value: Refs become ``${{ … }}`` strings."""
    if isinstance(value, Ref):
        return str(value)
    if isinstance(value, Task):
        raise TypeError(f"{where}: use {value.name}.output to read task {value.name!r}, not the task itself")
    if isinstance(value, Workflow):
        raise TypeError(f"{where}: a workflow is not a value (workflow= runs one as a child)")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime.timedelta):
        return duration(value)
    if isinstance(value, Mapping):
        out: Dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: map keys are strings, not {k!r}")
            out[k] = _value(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise TypeError(f"{where}: {type(value).__name__} is not a workflow value: {value!r}")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _refs(value: Any, pattern: re.Pattern[str]) -> List[str]:
    """The names read as tasks.NAME or inputs.NAME in the ${{ }} of value, in order."""
    names: List[str] = []
    for s in _strings(value):
        for m in _EXPR_RE.finditer(s):
            for r in pattern.finditer(m.group(1)):
                if r.group(1) not in names:
                    names.append(r.group(1))
    return names


def _retry(value: Union[int, Mapping[str, object]], where: str) -> Any:
    if isinstance(value, bool):
        raise TypeError(f"{where}: retry is a number of attempts or a mapping")
    if isinstance(value, int):
        return {"max_attempts": value}
    return _value(value, where)


def until(condition: object, max: int, every: Optional[Duration] = None) -> Dict[str, Any]:
    """``loop=until(output.state == "done", max=30, every="1s")``: run again until the condition reads true."""
    out: Dict[str, Any] = {"until": _value(condition, "loop.until"), "max": max}
    if every is not None:
        out["every"] = duration(every)
    return out


def over(items: object, max: Optional[int] = None, every: Optional[Duration] = None) -> Dict[str, Any]:
    """``loop=over(list_task.output)``: one iteration per element, in order."""
    out: Dict[str, Any] = {"over": _value(items, "loop.over")}
    if max is not None:
        out["max"] = max
    if every is not None:
        out["every"] = duration(every)
    return out


def wait_signal(name: str, timeout: Optional[Duration] = None) -> Dict[str, Any]:
    """``wait=wait_signal("approve", timeout="48h")``: the task's output is the signal's payload."""
    out: Dict[str, Any] = {"signal": name}
    if timeout is not None:
        out["timeout"] = duration(timeout)
    return out


def wait_for(length: Duration) -> Dict[str, Any]:
    """``wait=wait_for("10m")``: wait that long."""
    return {"for": duration(length)}


def wait_until(time: Union[str, Ref, datetime.datetime]) -> Dict[str, Any]:
    """``wait=wait_until(inputs.at)``: wait until an RFC 3339 time (a literal or an expression)."""
    if isinstance(time, datetime.datetime):
        if time.tzinfo is None:
            raise ValueError("wait_until: the datetime needs a time zone")
        return {"until": time.isoformat()}
    return {"until": _value(time, "wait.until")}


def retry_policy(
    max_attempts: int,
    *,
    initial: Optional[Duration] = None,
    factor: Optional[float] = None,
    max: Optional[Duration] = None,
    jitter: Optional[float] = None,
) -> Dict[str, Any]:
    """``retry=retry_policy(3, initial="1s", factor=2, max="30s", jitter=0.1)``."""
    backoff: Dict[str, Any] = {}
    if initial is not None:
        backoff["initial"] = duration(initial)
    if factor is not None:
        backoff["factor"] = factor
    if max is not None:
        backoff["max"] = duration(max)
    if jitter is not None:
        backoff["jitter"] = jitter
    out: Dict[str, Any] = {"max_attempts": max_attempts}
    if backoff:
        out["backoff"] = backoff
    return out


# --------------------------------------------------------------------------
# Tasks and workflows


class Task:
    """A task of a workflow; ``task.output`` reads its output."""

    def __init__(self, workflow: Workflow, name: str, spec: Dict[str, Any], needs: List[str]) -> None:
        self.workflow = workflow
        self.name = name
        self._spec = spec
        self._needs = needs

    @property
    def output(self) -> Ref:
        """``${{ tasks.NAME.output }}``; ``.output.field`` selects inside it."""
        return Ref(f"tasks.{self.name}.output", prec=_PREC_ATOM)

    def __repr__(self) -> str:
        return f"Task({self.name!r})"


NeedsArg = Union[None, Task, str, Sequence[Union[Task, str]]]
_current: contextvars.ContextVar[Optional[Workflow]] = contextvars.ContextVar(
    "robonet_workflow", default=None
)

# The order keys are written in, as the examples write them.
_TASK_KEYS = (
    "description", "needs", "join", "spread", "when", "loop", "on", "capability", "action",
    "workflow", "wait", "with", "accept", "verify", "on_failure", "retry", "timeout",
)


class _Registrar(Protocol):
    def register(self, __source: str, __filename: str) -> object: ...


class Workflow:
    """A workflow being written; see the module's documentation."""

    def __init__(
        self,
        name: str,
        version: int = 1,
        *,
        description: Optional[str] = None,
        inputs: Optional[Mapping[str, Mapping[str, object]]] = None,
        defaults: Optional[Mapping[str, object]] = None,
        trigger: Union[None, Sequence[str], Mapping[str, object]] = None,
        outputs: Optional[Mapping[str, object]] = None,
    ) -> None:
        if not _WORKFLOW_NAME_RE.match(name):
            raise ValueError(f"workflow name {name!r}: lowercase letters, digits, . _ - (max 63)")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(f"workflow version {version!r}: a positive integer")
        self.name = name
        self.version = version
        self.description = description
        self._inputs: Dict[str, Dict[str, Any]] = {}
        for input_name, decl in (inputs or {}).items():
            self._inputs[input_name] = _value(decl, f"inputs.{input_name}")
        self.defaults: Dict[str, object] = dict(defaults or {})
        self.trigger = trigger
        #: Named outputs: ``wf.outputs["report"] = summarize.output``.
        self.outputs: Dict[str, object] = dict(outputs or {})
        self._tasks: Dict[str, Task] = {}
        self._tokens: List[contextvars.Token[Optional[Workflow]]] = []

    # -- the context ``task()`` adds to

    def __enter__(self) -> Workflow:
        self._tokens.append(_current.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._tokens.pop())

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, version={self.version}, tasks={list(self._tasks)})"

    # -- references in scope

    inputs = inputs
    item = item
    index = index
    iteration = iteration
    previous = previous
    output = output

    @property
    def tasks(self) -> Dict[str, Task]:
        """The tasks so far, by name, in the order they were added."""
        return dict(self._tasks)

    # -- building

    def input(
        self,
        name: str,
        type: Union[InputType, type] = "any",
        *,
        default: object = ...,
        required: Optional[bool] = None,
        description: Optional[str] = None,
    ) -> Ref:
        """Declare an input (required unless it has a default) and return ``inputs.NAME``."""
        if not _IDENT_RE.match(name):
            raise ValueError(f"input name {name!r}: ^[a-z_][a-z0-9_]{{0,62}}$")
        if isinstance(type, str):
            if type not in _INPUT_TYPES:
                raise ValueError(f"input {name!r}: type {type!r} is not one of {', '.join(_INPUT_TYPES)}")
            type_name: str = type
        elif type in _PY_TYPES:
            type_name = _PY_TYPES[type]
        else:
            raise ValueError(f"input {name!r}: no input type for {type!r}")
        decl: Dict[str, Any] = {"type": type_name}
        if default is not ...:
            decl["default"] = _value(default, f"inputs.{name}.default")
        if required is not None:
            decl["required"] = required
        if description is not None:
            decl["description"] = description
        self._inputs[name] = decl
        return Ref(f"inputs.{name}", prec=_PREC_ATOM)

    def task(
        self,
        name: str,
        *,
        capability: Optional[str] = None,
        action: Optional[str] = None,
        with_: object = ...,
        needs: NeedsArg = None,
        spread: object = None,
        when: object = None,
        on_failure: Optional[OnFailure] = None,
        retry: Union[None, int, Mapping[str, object]] = None,
        timeout: Optional[Duration] = None,
        verify: Optional[int] = None,
        accept: object = None,
        join: Union[None, int, Mapping[str, object]] = None,
        loop: Optional[Mapping[str, object]] = None,
        on: Optional[Literal["every_node"]] = None,
        workflow: Union[None, str, Workflow] = None,
        wait: Optional[Mapping[str, object]] = None,
        description: Optional[str] = None,
    ) -> Task:
        """Add a task (the keys of docs/workflows.md; ``with_`` is ``with``)."""
        if not _IDENT_RE.match(name):
            raise ValueError(f"task name {name!r}: ^[a-z_][a-z0-9_]{{0,62}}$ (no hyphens: it is read as tasks.{name})")
        if name in self._tasks:
            raise ValueError(f"workflow {self.name} already has a task {name!r}")
        if on_failure is not None and on_failure not in ("retry", "skip", "abort"):
            raise ValueError(f"task {name!r}: on_failure is retry, skip or abort, not {on_failure!r}")
        where = f"task {name!r}"
        spec: Dict[str, Any] = {}

        def put(key: str, value: object) -> None:
            if value is not None:
                spec[key] = _value(value, f"{where} {key}")

        put("description", description)
        if join is not None:
            spec["join"] = {"min": join} if isinstance(join, int) and not isinstance(join, bool) else _value(join, f"{where} join")
        put("spread", spread)
        put("when", when)
        put("loop", loop)
        put("on", on)
        put("capability", capability)
        put("action", action)
        if workflow is not None:
            spec["workflow"] = f"{workflow.name}@{workflow.version}" if isinstance(workflow, Workflow) else workflow
        put("wait", wait)
        if with_ is not ...:
            spec["with"] = _value(with_, f"{where} with")
        put("accept", accept)
        put("verify", verify)
        put("on_failure", on_failure)
        if retry is not None:
            spec["retry"] = _retry(retry, f"{where} retry")
        if timeout is not None:
            spec["timeout"] = duration(timeout)
        t = Task(self, name, spec, _need_names(needs))
        self._tasks[name] = t
        return t

    # -- output

    def to_dict(self) -> Dict[str, Any]:
        """The spec as plain data (what ``to_yaml`` and ``to_json`` write)."""
        spec: Dict[str, Any] = {"name": self.name, "version": self.version}
        if self.description is not None:
            spec["description"] = self.description
        if self.trigger is not None:
            if isinstance(self.trigger, Mapping):
                spec["trigger"] = _value(self.trigger, "trigger")
            else:
                if isinstance(self.trigger, str):
                    raise TypeError("trigger is a list of event names, or {events: [...]}")
                spec["trigger"] = {"events": list(self.trigger)}
        defaults: Dict[str, Any] = {}
        for key, value in self.defaults.items():
            if key == "retry" and isinstance(value, (int, Mapping)):
                defaults[key] = _retry(value, "defaults.retry")
            elif key == "timeout" and isinstance(value, (str, datetime.timedelta, int, float)):
                defaults[key] = duration(value)
            else:
                defaults[key] = _value(value, f"defaults.{key}")
        outputs = {k: _value(v, f"outputs.{k}") for k, v in self.outputs.items()}
        task_specs = {name: self._task_spec(t) for name, t in self._tasks.items()}
        # Inputs read but not declared are declared as required, of any type
        # (and a trigger's event input, which its payload fills).
        declared = dict(self._inputs)
        read = _refs([defaults, outputs, list(task_specs.values())], _INPUT_REF_RE)
        if self.trigger is not None:
            read.append("event")
        for input_name in read:
            declared.setdefault(input_name, {"type": "any"})
        if declared:
            spec["inputs"] = declared
        if defaults:
            spec["defaults"] = defaults
        spec["tasks"] = task_specs
        if outputs:
            spec["outputs"] = outputs
        return spec

    def _task_spec(self, t: Task) -> Dict[str, Any]:
        needs = self._needs_of(t)
        spec = dict(t._spec)
        if needs:
            spec["needs"] = needs
        return {k: spec[k] for k in _TASK_KEYS if k in spec}

    def _read(self, t: Task) -> List[str]:
        """The other tasks of this workflow that t's expressions read."""
        return [n for n in _refs(t._spec, _TASK_REF_RE) if n != t.name and n in self._tasks]

    def _needs_of(self, t: Task) -> List[str]:
        explicit = list(dict.fromkeys(t._needs))
        read = [n for n in self._read(t) if n not in explicit]
        if "join" in t._spec:
            return explicit + read
        candidates = explicit + read
        kept = [
            n for n in read
            if not any(other != n and n in self._upstream(other) for other in candidates)
        ]
        order = list(self._tasks)
        return explicit + sorted(kept, key=order.index)

    def _upstream(self, name: str) -> set[str]:
        """Every task name (transitively) needs, by needs= or by what it reads."""
        seen: set[str] = set()
        stack = [name]
        while stack:
            t = self._tasks.get(stack.pop())
            if t is None:
                continue
            for n in t._needs + self._read(t):
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
        return seen

    def to_yaml(self) -> str:
        """The spec as YAML, as ``roboctl validate`` and ``register`` read it."""
        return dump_yaml(self.to_dict())

    def to_json(self) -> str:
        """The spec as JSON (the compiler reads JSON as YAML, which wants no raw control characters)."""
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False)
        return _NOT_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"

    @property
    def filename(self) -> str:
        """The file name the spec is registered under: ``NAME.yaml``."""
        return f"{self.name}.yaml"

    def register(self, client: _Registrar, filename: Optional[str] = None) -> object:
        """Register the workflow through ``client.register(spec_text, filename)``; returns what it returns."""
        return client.register(self.to_yaml(), filename or self.filename)


def _need_names(needs: NeedsArg) -> List[str]:
    if needs is None:
        return []
    if isinstance(needs, (Task, str)):
        needs = [needs]
    names: List[str] = []
    for n in needs:
        if isinstance(n, Task):
            names.append(n.name)
        elif isinstance(n, str):
            names.append(n)
        else:
            raise TypeError(f"needs: a task or a task name, not {n!r}")
    return names


def workflow(
    name: str,
    version: int = 1,
    *,
    description: Optional[str] = None,
    inputs: Optional[Mapping[str, Mapping[str, object]]] = None,
    defaults: Optional[Mapping[str, object]] = None,
    trigger: Union[None, Sequence[str], Mapping[str, object]] = None,
    outputs: Optional[Mapping[str, object]] = None,
) -> Workflow:
    """A new workflow; ``with workflow(...) as wf:`` makes ``task()`` add to it."""
    return Workflow(
        name, version, description=description, inputs=inputs, defaults=defaults,
        trigger=trigger, outputs=outputs,
    )


def task(
    name: str,
    *,
    capability: Optional[str] = None,
    action: Optional[str] = None,
    with_: object = ...,
    needs: NeedsArg = None,
    spread: object = None,
    when: object = None,
    on_failure: Optional[OnFailure] = None,
    retry: Union[None, int, Mapping[str, object]] = None,
    timeout: Optional[Duration] = None,
    verify: Optional[int] = None,
    accept: object = None,
    join: Union[None, int, Mapping[str, object]] = None,
    loop: Optional[Mapping[str, object]] = None,
    on: Optional[Literal["every_node"]] = None,
    workflow: Union[None, str, Workflow] = None,
    wait: Optional[Mapping[str, object]] = None,
    description: Optional[str] = None,
) -> Task:
    """Add a task to the workflow of the enclosing ``with workflow(...)`` (see ``Workflow.task``)."""
    wf = _current.get()
    if wf is None:
        raise RuntimeError(f"task({name!r}) outside `with workflow(...)`: use wf.task(...) or a with block")
    return wf.task(
        name, capability=capability, action=action, with_=with_, needs=needs, spread=spread,
        when=when, on_failure=on_failure, retry=retry, timeout=timeout, verify=verify,
        accept=accept, join=join, loop=loop, on=on, workflow=workflow, wait=wait,
        description=description,
    )


# --------------------------------------------------------------------------
# YAML: a small emitter for the spec's values (mappings with string keys,
# lists, strings, numbers, bools, null), readable and safe for YAML 1.1 and
# 1.2 readers alike: a string is written plain only when no reader could
# take it for anything else.

_WIDTH = 100
_INDICATORS = set("-?:,[]{}#&*!|>'\"%@`")
_NUMBERISH = set("0123456789+-.~=<")
_SPECIAL_WORDS = {
    "y", "yes", "n", "no", "true", "false", "on", "off", "null", "~", "",
}
_GO_DURATION = re.compile(r"^(?:[0-9]+(?:\.[0-9]+)?(?:ns|us|ms|s|m|h))+$")
_PLAIN_CHARS = re.compile(r"^[\x20-\x7e]+$")
# What a YAML reader refuses raw (JSON escapes the C0 controls itself).
_NOT_PRINTABLE = re.compile("[\x7f-\x9f\ufeff\u2028\u2029]")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def _plain_ok(s: str, flow: bool) -> bool:
    if not s or s != s.strip() or not _PLAIN_CHARS.match(s):
        return False
    if s.lower() in _SPECIAL_WORDS:
        return False
    if _GO_DURATION.match(s):  # 30s, 1h30m: no YAML reader takes these for numbers
        return True
    first = s[0]
    if first == "-":
        if len(s) < 2 or not s[1].isalpha():
            return False
    elif first in _INDICATORS or first in _NUMBERISH:
        return False
    if ": " in s or " #" in s or s.endswith(":"):
        return False
    if flow and any(c in s for c in ",[]{}:"):
        return False
    return True


def _quoted(s: str) -> str:
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or 0x7F <= code <= 0x9F or code in (0xFEFF, 0x2028, 0x2029) or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _scalar(value: Any, flow: bool = False) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        r = repr(value)
        if "e" in r and "." not in r:  # 1e-05: YAML 1.1 wants a dot
            mantissa, exp = r.split("e")
            r = f"{mantissa}.0e{exp}"
        return r
    if isinstance(value, str):
        return value if _plain_ok(value, flow) else _quoted(value)
    raise TypeError(f"cannot write {type(value).__name__} as YAML: {value!r}")


def _literal_block(s: str) -> Optional[Tuple[str, List[str]]]:
    """A multi-line string as a literal block (header, lines), or None."""
    body = s.rstrip("\n")
    trailing = len(s) - len(body)
    if "\n" not in body or not body:
        return None
    if not all(ch == "\n" or ch == "\t" or 0x20 <= ord(ch) <= 0x7E or ord(ch) > 0xA0 for ch in body):
        return None
    if any(ord(ch) in (0xFEFF, 0x2028, 0x2029) or 0xD800 <= ord(ch) <= 0xDFFF for ch in body):
        return None
    lines = body.split("\n")
    if lines[0][:1] in (" ", "\t") or any(line and not line.strip() for line in lines):
        return None
    header = {0: "|-", 1: "|"}.get(trailing, "|+")
    return header, lines + [""] * max(0, trailing - 1)


def _flow(value: Any) -> Optional[str]:
    """A short collection of scalars in flow style, or None."""
    if isinstance(value, list):
        if any(isinstance(v, (list, dict)) or (isinstance(v, str) and "\n" in v) for v in value):
            return None
        return "[" + ", ".join(_scalar(v, flow=True) for v in value) + "]"
    if isinstance(value, dict):
        if any(isinstance(v, (list, dict)) or (isinstance(v, str) and "\n" in v) for v in value.values()):
            return None
        return "{" + ", ".join(f"{_scalar(k, flow=True)}: {_scalar(v, flow=True)}" for k, v in value.items()) + "}"
    return None


def _emit_value(prefix: str, value: Any, indent: int, out: List[str], block: bool = False) -> None:
    """Write value after prefix ("key:" or "-"), its nested lines at indent (block: no flow style)."""
    if isinstance(value, (dict, list)):
        if not value:
            out.append(f"{prefix} {'{}' if isinstance(value, dict) else '[]'}")
            return
        flow = None if block else _flow(value)
        if flow is not None and len(prefix) + 1 + len(flow) <= _WIDTH:
            out.append(f"{prefix} {flow}")
            return
        nested: List[str] = []
        if isinstance(value, dict):
            _emit_map(value, indent, nested)
        else:
            _emit_list(value, indent, nested)
        if prefix.endswith("-"):
            # "- key: v" / "- - v": the first nested line shares the dash's line.
            out.append(prefix + " " + nested[0][indent:])
            out.extend(nested[1:])
        else:
            out.append(prefix)
            out.extend(nested)
        return
    if isinstance(value, str):
        literal = _literal_block(value)
        if literal is not None:
            header, lines = literal
            out.append(f"{prefix} {header}")
            out.extend((" " * indent + line) if line else "" for line in lines)
            return
    out.append(f"{prefix} {_scalar(value)}")


def _emit_map(value: Dict[str, Any], indent: int, out: List[str]) -> None:
    for k, v in value.items():
        if not isinstance(k, str):
            raise TypeError(f"cannot write the map key {k!r} as YAML: keys are strings")
        _emit_value(" " * indent + _scalar(k) + ":", v, indent + 2, out)


def _emit_list(value: List[Any], indent: int, out: List[str]) -> None:
    for v in value:
        _emit_value(" " * indent + "-", v, indent + 2, out)


def dump_yaml(spec: Mapping[str, Any]) -> str:
    """Write a spec (plain data) as YAML; a blank line sets off each task and top-level section."""
    out: List[str] = []
    for k, v in spec.items():
        if k == "tasks" and isinstance(v, dict) and v:
            out.append("")
            out.append("tasks:")
            for i, (name, body) in enumerate(v.items()):
                if i:
                    out.append("")
                _emit_value("  " + _scalar(name) + ":", body, 4, out)
            continue
        lines: List[str] = []
        _emit_value(_scalar(k) + ":", v, 2, lines, block=k in ("inputs", "defaults", "outputs"))
        if len(lines) > 1 and out:
            out.append("")
        out.extend(lines)
    return "\n".join(out) + "\n"
