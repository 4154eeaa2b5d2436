"""Binding an attempt's JSON input to an action's keyword arguments."""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Tuple


class BindError(Exception):
    """The input does not fit the action's parameters; the message says how."""


_MISSING = object()


@dataclass(frozen=True)
class Param:
    name: str
    annotation: Any  # a type, or _MISSING when unannotated
    default: Any  # _MISSING when required


@dataclass(frozen=True)
class Signature:
    """What an action takes: its context parameter, then keyword inputs."""

    action: str
    params: Tuple[Param, ...]
    var_keyword: bool  # takes **kwargs: unknown inputs are passed on

    def names(self) -> List[str]:
        return [p.name for p in self.params]


def inspect_action(action: str, fn: Callable[..., Any]) -> Signature:
    """Reads fn's parameters: the first is the context, the others are inputs."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: bind without type checks
        hints = {}
    ps = list(sig.parameters.values())
    if not ps or ps[0].kind not in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        raise TypeError(f"action {action}: the first parameter must be the context (def {fn.__name__}(ctx, ...))")
    params: List[Param] = []
    var_kw = False
    for p in ps[1:]:
        if p.kind == inspect.Parameter.VAR_KEYWORD:
            var_kw = True
            continue
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            raise TypeError(f"action {action}: parameter {p.name} cannot be bound by name; make it a keyword parameter")
        params.append(
            Param(
                name=p.name,
                annotation=hints.get(p.name, _MISSING),
                default=_MISSING if p.default is inspect.Parameter.empty else p.default,
            )
        )
    return Signature(action=action, params=tuple(params), var_keyword=var_kw)


def bind(sig: Signature, value: Any) -> Dict[str, Any]:
    """Returns the keyword arguments for value, the attempt's decoded input.

    The input must be a JSON object (or null when nothing is required);
    every required parameter must be given, no unknown one (unless the
    action takes **kwargs), and each must fit its annotation.
    """
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise BindError(
            f"action {sig.action} takes keyword inputs {_list(sig.names())}: its input must be a JSON object "
            f"(the task's with:), not {_describe(value)}"
        )
    known = {p.name for p in sig.params}
    unknown = sorted(k for k in value if k not in known)
    if unknown and not sig.var_keyword:
        raise BindError(
            f"action {sig.action} takes no input {_list(unknown)} (it takes {_list(sig.names()) or 'none'})"
        )
    out: Dict[str, Any] = {}
    missing = [p.name for p in sig.params if p.default is _MISSING and p.name not in value]
    if missing:
        raise BindError(
            f"action {sig.action} needs input {_list(missing)} (with: {{{missing[0]}: ...}}); "
            f"it was given {_list(sorted(value)) or 'none'}"
        )
    for p in sig.params:
        if p.name not in value:
            continue
        v = value[p.name]
        if p.annotation is not _MISSING:
            ok, conv = check(v, p.annotation)
            if not ok:
                raise BindError(
                    f"input {p.name} of action {sig.action}: want {type_name(p.annotation)}, got {_describe(v)}"
                )
            v = conv
        out[p.name] = v
    for k in unknown:
        out[k] = value[k]
    return out


def check(v: Any, tp: Any) -> Tuple[bool, Any]:
    """Whether v (decoded JSON) fits the annotation tp, and v converted (an int for a float)."""
    if tp is Any or tp is object or tp is inspect.Parameter.empty:
        return True, v
    if tp is None or tp is type(None):
        return v is None, v
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is getattr(types, "UnionType")):
        for a in args:
            ok, conv = check(v, a)
            if ok:
                return True, conv
        return False, v
    if origin is typing.Literal:
        return v in args, v
    if tp is bool:
        return isinstance(v, bool), v
    if tp is int:
        return isinstance(v, int) and not isinstance(v, bool), v
    if tp is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False, v
        return True, float(v)
    if tp is str:
        return isinstance(v, str), v
    base = origin or tp
    if base in (list, List, collections.abc.Sequence, collections.abc.Iterable, tuple):
        if not isinstance(v, list):
            return False, v
        if args and base is not tuple:
            conv_list = []
            for item in v:
                ok, c = check(item, args[0])
                if not ok:
                    return False, v
                conv_list.append(c)
            return True, conv_list
        return True, tuple(v) if base is tuple else v
    if base in (dict, Dict, Mapping, collections.abc.Mapping, collections.abc.MutableMapping):
        if not isinstance(v, dict):
            return False, v
        if len(args) == 2:
            conv_dict = {}
            for k, item in v.items():
                ok, c = check(item, args[1])
                if not ok:
                    return False, v
                conv_dict[k] = c
            return True, conv_dict
        return True, v
    if isinstance(tp, type):
        return isinstance(v, tp), v
    return True, v  # an annotation the binder does not know: not checked


def type_name(tp: Any) -> str:
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _describe(v: Any) -> str:
    if v is None:
        return "null"
    kind = {bool: "bool", int: "int", float: "float", str: "string", list: "list", dict: "object"}.get(type(v), type(v).__name__)
    text = repr(v)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} {text}"


def _list(names: List[str]) -> str:
    return ", ".join(names)
