"""Binding inputs to an action's keyword arguments (no node needed)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from robonet._binding import BindError, bind, inspect_action
from robonet._logs import MAX_LINE_BYTES, AttemptLog, clip


def summarize(ctx: Any, text: str, max_words: int = 50, ratio: float = 0.5, tags: Optional[List[str]] = None) -> Dict[str, Any]:
    return {}


def test_binds_keywords_with_defaults_and_conversions() -> None:
    sig = inspect_action("summarize", summarize)
    assert bind(sig, {"text": "hi", "ratio": 1}) == {"text": "hi", "ratio": 1.0}
    assert bind(sig, {"text": "hi", "tags": ["a"], "max_words": 3}) == {"text": "hi", "tags": ["a"], "max_words": 3}


@pytest.mark.parametrize(
    "value, want",
    [
        ({}, "needs input text"),
        ({"text": 3}, "input text of action summarize: want str, got int 3"),
        ({"text": "a", "max_words": "ten"}, "want int, got string 'ten'"),
        ({"text": "a", "max_words": True}, "want int, got bool True"),
        ({"text": "a", "tags": [1]}, "input tags"),
        ({"text": "a", "colour": "red"}, "takes no input colour (it takes text, max_words, ratio, tags)"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_bind_errors_say_what_is_wrong(value: Any, want: str) -> None:
    with pytest.raises(BindError, match=None) as e:
        bind(inspect_action("summarize", summarize), value)
    assert want in str(e.value)


def test_var_keyword_takes_the_rest() -> None:
    def f(ctx: Any, a: int, **rest: Any) -> None: ...

    assert bind(inspect_action("f", f), {"a": 1, "b": 2}) == {"a": 1, "b": 2}


def test_action_needs_a_context_parameter() -> None:
    with pytest.raises(TypeError, match="first parameter must be the context"):
        inspect_action("f", lambda: None)


def test_log_lines_are_clipped_and_batched() -> None:
    assert clip("x" * 10) == "x" * 10
    long = clip("é" * 5000)
    assert len(long.encode()) <= MAX_LINE_BYTES and "clipped: 10000 bytes" in long
    log = AttemptLog(3, "7")
    log.write("stdout", "one\ntwo\npart")
    log.line("stderr", "ERROR x: boom\nTraceback")
    msgs = log.drain()
    assert [(m.log.stream, list(m.log.lines)) for m in msgs] == [("stdout", ["one", "two"]), ("stderr", ["ERROR x: boom", "Traceback"])]
    assert all(m.log.slot == 3 and m.log.attempt_id == "7" for m in msgs)
    assert [list(m.log.lines) for m in log.drain(final=True)] == [["part"]]
