"""Tests of robonet.workflows: workflows written in Python.

The round trips compile with the real compiler: `roboctl validate -o json`
prints each spec's IR hash, and a Python workflow must compile to the same
IR (hash and plan) as the YAML spec it stands for. roboctl is $ROBOCTL, or
bin/roboctl at the repository's root, or built into a temporary directory
with `go build` (the tests that need it are skipped without Go).

PyYAML (Debian's python3-yaml) is used here only to read the examples and
to check what to_yaml() writes; robonet.workflows itself has no dependency.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys
from typing import Any, Dict, List

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SDK = ROOT / "sdk" / "python"
if str(SDK) not in sys.path:
    sys.path.insert(0, str(SDK))

from robonet import workflows as rw  # noqa: E402
from robonet.workflows import (  # noqa: E402
    Workflow,
    call,
    cond,
    expr,
    has,
    index,
    inputs,
    item,
    iteration,
    output,
    over,
    previous,
    retry_policy,
    size,
    task,
    tasks,
    until,
    wait_for,
    wait_signal,
    workflow,
)

yaml = pytest.importorskip("yaml")

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


# --------------------------------------------------------------------------
# roboctl


@pytest.fixture(scope="session")
def roboctl(tmp_path_factory: pytest.TempPathFactory) -> str:
    env = os.environ.get("ROBOCTL")
    if env:
        return env
    built = ROOT / "bin" / "roboctl"
    if built.exists():
        return str(built)
    go = shutil.which("go")
    if go is None:
        pytest.skip("no roboctl: set $ROBOCTL, run `go build -o bin/ ./cmd/...`, or install Go")
    out = tmp_path_factory.mktemp("roboctl") / "roboctl"
    subprocess.run([go, "build", "-o", str(out), "./cmd/roboctl"], cwd=ROOT, check=True)
    return str(out)


def validate(roboctl: str, path: pathlib.Path) -> Dict[str, Any]:
    """`roboctl validate -o json FILE`'s report of the file, without its name."""
    proc = subprocess.run([roboctl, "validate", "-o", "json", str(path)], capture_output=True, text=True)
    reports = json.loads(proc.stdout)
    assert len(reports) == 1, proc.stdout + proc.stderr
    report: Dict[str, Any] = reports[0]
    assert report["ok"], f"{path} does not compile:\n{proc.stdout}{proc.stderr}\n{path.read_text()}"
    assert proc.returncode == 0
    del report["file"]
    return report


def compile_text(roboctl: str, tmp_path: pathlib.Path, text: str, name: str) -> Dict[str, Any]:
    path = tmp_path / name
    path.write_text(text)
    return validate(roboctl, path)


def assert_same_ir(roboctl: str, tmp_path: pathlib.Path, wf: Workflow, example: str) -> None:
    want = validate(roboctl, ROOT / "examples" / example)
    got = compile_text(roboctl, tmp_path, wf.to_yaml(), "from-python-" + example)
    assert got["ir_hash"] == want["ir_hash"], (
        f"{example}: the Python workflow compiles to another IR\n--- to_yaml():\n{wf.to_yaml()}\n"
        f"--- plan:\n{json.dumps(got, indent=1)}\n--- want:\n{json.dumps(want, indent=1)}"
    )
    assert got == want


# --------------------------------------------------------------------------
# Reading YAML as the Go compiler does (YAML 1.2: `on`, `yes`, `no` are
# strings, not bools; no timestamps).


class SpecLoader(yaml.SafeLoader):  # type: ignore[misc,name-defined]
    pass


SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    __import__("re").compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def load(text: str) -> Any:
    return yaml.load(text, Loader=SpecLoader)


def from_spec(spec: Dict[str, Any]) -> Workflow:
    """The generic loader: a parsed spec turned into DSL calls."""
    wf = Workflow(
        spec["name"],
        spec["version"],
        description=spec.get("description"),
        defaults=spec.get("defaults"),
        trigger=spec.get("trigger"),
    )
    for name, decl in (spec.get("inputs") or {}).items():
        wf.input(
            name,
            decl.get("type", "any"),
            default=decl.get("default", ...),
            required=decl.get("required"),
            description=decl.get("description"),
        )
    for name, body in spec["tasks"].items():
        kwargs = {("with_" if k == "with" else k): v for k, v in body.items()}
        wf.task(name, **kwargs)
    for name, value in (spec.get("outputs") or {}).items():
        wf.outputs[name] = value
    return wf


# --------------------------------------------------------------------------
# Every example, through the generic loader


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_round_trip_every_example(roboctl: str, tmp_path: pathlib.Path, path: pathlib.Path) -> None:
    wf = from_spec(load(path.read_text()))
    assert_same_ir(roboctl, tmp_path, wf, path.name)
    # What to_yaml writes reads back as the same data, also with YAML 1.1.
    assert yaml.safe_load(wf.to_yaml()) == wf.to_dict()
    assert load(wf.to_yaml()) == wf.to_dict()
    # And the JSON form compiles to the same IR.
    assert compile_text(roboctl, tmp_path, wf.to_json(), "json-" + path.stem + ".json")["ir_hash"] == (
        validate(roboctl, path)["ir_hash"]
    )


def test_examples_are_all_there() -> None:
    assert len(EXAMPLES) >= 14, EXAMPLES


# --------------------------------------------------------------------------
# Examples written by hand in the DSL


def test_issue_snippet(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("scan-and-summarize", version=1) as wf:
        hosts = task("discover", capability="net.scan", action="exec", with_={"argv": ["scan", inputs.targets]})
        probes = task("probe", capability="net.scan", action="http", spread=hosts.output.hosts,
                      with_={"url": f"http://{wf.item}/health"}, on_failure="skip")
        task("summarize", capability="ai.inference", action="summarize", with_={"text": probes.output})
    report = compile_text(roboctl, tmp_path, wf.to_yaml(), "snippet.yaml")
    assert [t["name"] for t in report["tasks"]] == ["discover", "probe", "summarize"]
    assert report["inputs"] == [{"name": "targets", "type": "any", "required": True}]
    spec = wf.to_dict()
    assert spec["tasks"]["probe"]["needs"] == ["discover"]
    assert spec["tasks"]["probe"]["spread"] == "${{ tasks.discover.output.hosts }}"
    assert spec["tasks"]["probe"]["with"] == {"url": "http://${{ item }}/health"}
    assert spec["tasks"]["summarize"]["needs"] == ["probe"]
    assert spec["tasks"]["summarize"]["with"] == {"text": "${{ tasks.probe.output }}"}

    class Client:
        def __init__(self) -> None:
            self.calls: List[Any] = []

        def register(self, source: str, filename: str = "workflow.yaml") -> str:
            self.calls.append((source, filename))
            return "registered"

    client = Client()
    assert wf.register(client) == "registered"
    assert client.calls == [(wf.to_yaml(), "scan-and-summarize.yaml")]
    wf.register(client, "custom.yaml")
    assert client.calls[-1][1] == "custom.yaml"


def test_hello(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("hello", 1, description="Greets someone by name.") as wf:
        name = wf.input("name", str, default="world", description="Who to greet.")
        greet = task("greet", description="Build the greeting.", capability="core", action="echo",
                     with_={"greeting": f"Hello, {name}!"})
        wf.outputs["greeting"] = greet.output.greeting
    assert_same_ir(roboctl, tmp_path, wf, "hello.yaml")


def test_fan_out(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("fan-out", 1, description="Squares every number from 1 to N, then adds the squares up.",
                  defaults={"timeout": datetime.timedelta(seconds=30)}) as wf:
        count = wf.input("count", int, default=5, description="How many numbers to square.")
        numbers = task("numbers", description="Produce the list [1, 2, ..., count] as JSON.",
                       capability="code.exec", action="exec",
                       with_={"argv": ["sh", "-c", 'seq -s, 1 "$1" | sed "s/.*/[&]/"', "numbers", count]})
        square = task("square", description="Square one number.", spread=numbers.output,
                      capability="code.exec", action="exec",
                      with_={"argv": ["sh", "-c", "echo $(( $1 * $1 ))", "square", item],
                             "env": {"POSITION": f"{index}"}})
        x = expr("x")
        total = task("total", description="Add the squares up.", capability="code.exec", action="exec",
                     with_={"argv": ["awk", "{ s += $1 } END { print s }"],
                            "stdin": square.output.map(x, call("string", x)).join("\n")})
        wf.outputs.update(squares=square.output, total=total.output)
    assert wf.to_dict()["tasks"]["square"]["needs"] == ["numbers"]
    assert_same_ir(roboctl, tmp_path, wf, "fan-out.yaml")


def test_diamond(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("diamond", 1, description="Describes the machine, inspects the answer and optionally archives it.",
                  defaults={"retry": retry_policy(3, initial="2s", factor=2, max="1m", jitter=0.2),
                            "timeout": "1m"}) as wf:
        archive_it = wf.input("archive", bool, default=False, description="Also store a copy of the description.")
        archive_dir = wf.input("archive_dir", str, default="/tmp/robonet-archive",
                               description="Where archive writes its copy.")
        system = task("system", description="Name the operating system and kernel.",
                      capability="code.exec", action="exec", with_={"argv": ["uname", "-sr"]})
        inspect = task("inspect", description="Pick the answer apart (runs inline in the engine's echo action).",
                       capability="core", action="echo",
                       with_={"kernel": system.output, "words": size(system.output.split(" "))})
        archive = task("archive", description="Store a copy, only when asked to.", when=archive_it,
                       capability="code.exec", action="exec",
                       with_={"argv": ["sh", "-c",
                                       r'mkdir -p "$1" && printf "%s\n" "$2" > "$1/system.txt" && echo "$1/system.txt"',
                                       "archive", archive_dir, system.output]},
                       timeout=datetime.timedelta(seconds=10))
        report = task("report", capability="core", action="echo",
                      with_={"inspected": inspect.output, "archived_to": archive.output})
        wf.outputs["report"] = report.output
    assert wf.to_dict()["tasks"]["report"]["needs"] == ["inspect", "archive"]
    assert_same_ir(roboctl, tmp_path, wf, "diamond.yaml")


def test_approval(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("approval", 1, description="Plans a change, waits for a person's approval, then applies it.") as wf:
        change = wf.input("change", "string", default="resize the orders database volume to 200 GiB")
        plan = task("plan", capability="core", action="echo",
                    with_={"change": change, "steps": ["snapshot the volume", "resize it", "grow the filesystem"]})
        approve = task("approve", needs=plan, wait=wait_signal("approve", timeout=datetime.timedelta(hours=48)))
        ok = approve.output.ok
        apply = task("apply", when=has(ok) & (ok == True),  # noqa: E712 (CEL, not Python)
                     capability="core", action="echo",
                     with_={"applied": plan.output.change,
                            "approved_by": cond(has(approve.output.by), approve.output.by, "someone")})
        wf.outputs.update(approval=approve.output, applied=apply.output)
    # apply reads plan too, but plan is upstream of approve: needs [approve], as the YAML says.
    assert wf.to_dict()["tasks"]["apply"]["needs"] == ["approve"]
    assert_same_ir(roboctl, tmp_path, wf, "approval.yaml")


def test_loop_poll(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("loop-poll", 1,
                  description="Starts a job that takes a few seconds and polls it every second until it is done.") as wf:
        seconds = wf.input("seconds", int, default=2, description="How long the job takes.")
        start = task("start", description="Starts the job; it answers done once ready_at (Unix seconds) has passed.",
                     capability="code.exec", action="exec",
                     with_={"argv": ["sh", "-c",
                                     r'echo "{\"job\": \"$ROBONET_INSTANCE_ID\", \"ready_at\": $(( $(date +%s) + $1 ))}"',
                                     "sh", seconds]})
        poll = task("poll", description="Asks for the job's state; loops until it is done.",
                    capability="code.exec", action="exec",
                    with_={"argv": ["sh", "-c",
                                    r'if [ "$(date +%s)" -ge "$1" ]; then s=done; else s=running; fi; '
                                    r'echo "{\"state\": \"$s\", \"poll\": $2}"',
                                    "sh", start.output.ready_at, wf.iteration]},
                    loop=until(output.state == "done", max=30, every=datetime.timedelta(seconds=1)))
        wf.outputs["state"] = poll.output[size(poll.output) - 1].state
        wf.outputs["polls"] = size(poll.output)
    assert wf.to_dict()["tasks"]["poll"]["loop"] == {
        "until": '${{ output.state == "done" }}', "max": 30, "every": "1s"}
    assert_same_ir(roboctl, tmp_path, wf, "loop-poll.yaml")


def test_scan_and_summarize(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("scan-and-summarize", version=1,
                  defaults={"retry": retry_policy(3, initial="1s", factor=2, max="30s"), "timeout": "5m"}) as wf:
        targets = wf.input("targets", list)
        hosts = task("discover", capability="net.scan", action="exec", with_={"argv": ["scan", targets]})
        probes = task("probe", capability="net.scan", action="http", spread=hosts.output.hosts,
                      with_={"url": f"http://{wf.item}/health"}, on_failure="skip")
        summary = task("summarize", when=size(probes.output) > 0, capability="ai.inference", action="exec",
                       with_={"argv": ["summarize"], "stdin": probes.output})
        wf.outputs["report"] = summary.output
    assert_same_ir(roboctl, tmp_path, wf, "scan-and-summarize.yaml")


def test_quorum(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("quorum", 1, description="Decides on the first two of three votes, and fetches from the "
                  "fastest of three mirrors.") as wf:
        a = task("vote_a", capability="core", action="echo", with_={"vote": "commit"})
        b = task("vote_b", capability="core", action="echo", with_={"vote": "commit"})
        c = task("vote_c", description="A slow voter; the decision does not wait for it.",
                 capability="core", action="sleep", with_={"duration": "2s"})
        v = expr("v")
        decide = task("decide", needs=[a, b, c], join=2, capability="core", action="echo",
                      with_={"votes": expr(f"[{a.output}, {b.output}, {c.output}]").filter(v, v != None)  # noqa: E711
                             .map(v, v.vote),
                             "late": c.output})
        near = task("mirror_near", capability="core", action="echo", with_={"mirror": "near"})
        task("mirror_far", capability="core", action="sleep", with_={"duration": "30s"})
        task("mirror_slow", capability="core", action="sleep", with_={"duration": "30s"})
        fetch = task("fetch", needs=["mirror_near", "mirror_far", "mirror_slow"], join={"min": 1, "cancel_rest": True},
                     capability="core", action="echo", with_={"from": near.output.mirror})
        wf.outputs.update(decision=decide.output, vote_c=c.output, fetched=fetch.output)
    assert_same_ir(roboctl, tmp_path, wf, "quorum.yaml")


def test_foreach(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("foreach", 1, description="Appends words one at a time, each step reading the one before.") as wf:
        words = wf.input("words", list, default=["alpha", "beta", "gamma"])
        lst = task("list", capability="core", action="echo", with_=words)
        each = task("each", loop=over(lst.output), capability="code.exec", action="exec",
                    with_={"argv": ["sh", "-c", 'printf "%s%s" "$(cat)" "$1"', "sh", item],
                           "stdin": cond(iteration == 0, "", call("string", previous) + " ")})
        wf.outputs["steps"] = each.output
    assert_same_ir(roboctl, tmp_path, wf, "foreach.yaml")


def test_on_event(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("on-event", 1, trigger=["order.created"],
                  description="Writes a receipt for each order.created event, waits two seconds, then ships it.") as wf:
        event = wf.input("event", "any", description='The payload of the event, e.g. {"id": "A-17", "total": 42.5}')
        receipt = task("receipt", capability="core", action="echo",
                       with_={"order": f"{event.id}", "total": event.total})
        cool_down = task("cool_down", needs=receipt, wait=wait_for(2))
        ship = task("ship", capability="core", action="echo",
                    with_={"shipped": receipt.output.order, "after": cool_down.output})
        wf.outputs["shipped"] = ship.output.shipped
    assert wf.to_dict()["tasks"]["ship"]["needs"] == ["cool_down"]
    assert_same_ir(roboctl, tmp_path, wf, "on-event.yaml")


def test_child(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("child", 1, description="Sums a list by divide and conquer, each half summed by a child "
                  "instance of this workflow.") as wf:
        numbers = wf.input("numbers", list, default=[3, 1, 4, 1, 5, 9, 2, 6])
        n = size(numbers)
        halves = task("halves", capability="core", action="echo",
                      with_={"halves": cond(n > 1, [numbers.slice(0, n / 2), numbers.slice(n / 2, n)], [])})
        sums = task("sum_halves", spread=halves.output.halves, workflow="child", with_={"numbers": item})
        total = task("total", when=size(sums.output) == 2, capability="code.exec", action="exec",
                     with_={"argv": ["sh", "-c", "echo $(($1 + $2))", "sh", sums.output[0].sum, sums.output[1].sum]})
        wf.outputs["sum"] = cond(n == 0, 0, cond(n == 1, numbers[0], total.output))
        wf.outputs["levels"] = cond(n <= 1, 1, 1 + call("math.greatest", sums.output[0].levels, sums.output[1].levels))
    assert_same_ir(roboctl, tmp_path, wf, "child.yaml")


def test_every_node_and_accept(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("every-node", 1, description="Asks every node serving code.exec for its host name.") as wf:
        inventory = task("inventory", capability="code.exec", action="exec", on="every_node",
                         with_={"argv": ["hostname"]})
        r = expr("r")
        report = task("report", capability="core", action="echo",
                      with_={"nodes": size(inventory.output), "names": inventory.output.map(r, r.node)})
        wf.outputs.update(hosts=inventory.output, report=report.output)
    assert '"on": every_node' in wf.to_yaml()
    assert_same_ir(roboctl, tmp_path, wf, "every-node.yaml")

    with workflow("accept", 1, description="Retries a sampler until its score is good enough, and drops words "
                  "that are too short.") as wf:
        min_score = wf.input("min_score", float, default=0.8, description="The lowest score accepted.")
        words = wf.input("words", list, default=["alpha", "be", "gamma"])
        sample = task("sample", description="Scores 0.3 more on every attempt; the third one (0.9) is accepted.",
                      capability="code.exec", action="exec",
                      with_={"argv": ["sh", "-c",
                                      r'echo "{\"score\": 0.$((ROBONET_ATTEMPT * 3)), \"attempt\": $ROBONET_ATTEMPT}"']},
                      accept=output.score >= min_score,
                      retry=retry_policy(4, initial=datetime.timedelta(milliseconds=200), factor=1))
        lengths = task("lengths", description="Counts each word's letters; a word shorter than 3 letters is not "
                       "accepted and, under skip, is null.", capability="code.exec", action="exec",
                       spread=words, with_={"argv": ["sh", "-c", 'printf "%s" "${#1}"', "sh", item]},
                       accept=(output == size(item)) & (output >= 3), on_failure="skip")
        wf.outputs.update(sample=sample.output, lengths=lengths.output)
    # The IR keeps an accept check as written (for the error of an attempt it
    # rejects), so the expression must read exactly as in the YAML.
    assert wf.to_dict()["tasks"]["lengths"]["accept"] == "${{ output == size(item) && output >= 3 }}"
    assert_same_ir(roboctl, tmp_path, wf, "accept.yaml")


# --------------------------------------------------------------------------
# References and expressions


def test_references_render_as_expressions() -> None:
    assert str(inputs.targets) == "${{ inputs.targets }}"
    assert f"http://{item}/health" == "http://${{ item }}/health"
    assert f"{tasks.discover.output.hosts[0]}" == "${{ tasks.discover.output.hosts[0] }}"
    assert str(tasks.t.output["a-b"]) == '${{ tasks.t.output["a-b"] }}'
    assert str(size(tasks.t.output) > 0) == "${{ size(tasks.t.output) > 0 }}"
    assert str((inputs.a == 1) & ~inputs.b) == "${{ inputs.a == 1 && !inputs.b }}"
    assert str((inputs.a + 1) * 2) == "${{ (inputs.a + 1) * 2 }}"
    assert str(1 - inputs.a) == "${{ 1 - inputs.a }}"
    assert str(inputs.a - (inputs.b - inputs.c)) == "${{ inputs.a - (inputs.b - inputs.c) }}"
    assert str(inputs.a - inputs.b - inputs.c) == "${{ inputs.a - inputs.b - inputs.c }}"
    assert str(-(inputs.a + 1) % 3) == "${{ -(inputs.a + 1) % 3 }}"
    assert str((inputs.a | inputs.b) & inputs.c) == "${{ (inputs.a || inputs.b) && inputs.c }}"
    assert str(inputs.a | inputs.b & inputs.c) == "${{ inputs.a || inputs.b && inputs.c }}"
    assert str((~inputs.a).b) == "${{ (!inputs.a).b }}"
    assert str(cond(cond(inputs.a, 1, 2) == 1, cond(inputs.b, 3, 4), 5)) == (
        "${{ (inputs.a ? 1 : 2) == 1 ? (inputs.b ? 3 : 4) : 5 }}")
    assert str(expr("a + b") * 2) == "${{ (a + b) * 2 }}"
    assert str(inputs.s == 'say "hi"\n') == '${{ inputs.s == "say \\"hi\\"\\n" }}'
    assert str(inputs.x != None) == "${{ inputs.x != null }}"  # noqa: E711
    assert str(inputs.xs.map(expr("x"), expr("x") * 2)) == "${{ inputs.xs.map(x, x * 2) }}"
    assert str(cond(iteration == 0, "", previous)) == '${{ iteration == 0 ? "" : previous }}'
    assert str(expr(f"size({tasks.p.output}) > 0")) == "${{ size(tasks.p.output) > 0 }}"
    assert str(expr(f"{inputs.a + 1} * 2")) == "${{ (inputs.a + 1) * 2 }}"
    assert str(expr("${{ inputs.x }}")) == "${{ inputs.x }}"
    assert str(has(inputs.m.k) | ~has(inputs.m.j)) == "${{ has(inputs.m.k) || !has(inputs.m.j) }}"
    assert str(output.score >= inputs.min_score) == "${{ output.score >= inputs.min_score }}"
    assert str(call("math.greatest", [1, 2.5, {"k": True}])) == '${{ math.greatest([1, 2.5, {"k": true}]) }}'


def test_references_refuse_python_truth_and_iteration() -> None:
    with pytest.raises(TypeError, match="truth value"):
        bool(inputs.x)
    with pytest.raises(TypeError, match="&, \\| and ~"):
        if inputs.x == 1:
            pass
    with pytest.raises(TypeError, match="iterated"):
        list(inputs.x)
    with pytest.raises(ValueError, match="format spec"):
        f"{inputs.x:>10}"
    with pytest.raises(AttributeError):
        inputs.x._private
    with pytest.raises(AttributeError):
        inputs.x.foo = 1  # type: ignore[misc]
    refs = {inputs.x: 1}  # hashable, by identity
    assert len(refs) == 1


def test_values() -> None:
    with workflow("values") as wf:
        t = task("t", capability="core", action="echo",
                 with_={"a": (1, 2.5, None, True), "d": datetime.timedelta(minutes=1, seconds=30),
                        "nested": {"ref": inputs.x, "list": [item]}},
                 timeout=90, retry=2)
    spec = wf.to_dict()["tasks"]["t"]
    assert spec["with"] == {"a": [1, 2.5, None, True], "d": "1m30s",
                            "nested": {"ref": "${{ inputs.x }}", "list": ["${{ item }}"]}}
    assert spec["timeout"] == "1m30s"
    assert spec["retry"] == {"max_attempts": 2}
    with pytest.raises(TypeError, match="use t.output"):
        wf.task("u", capability="core", action="echo", with_={"x": t})
    with pytest.raises(TypeError, match="map keys are strings"):
        wf.task("v", capability="core", action="echo", with_={1: "x"})
    with pytest.raises(TypeError, match="not a workflow value"):
        wf.task("w", capability="core", action="echo", with_={"x": object()})


@pytest.mark.parametrize("value, want", [
    (datetime.timedelta(0), "0s"),
    (datetime.timedelta(milliseconds=500), "500ms"),
    (datetime.timedelta(microseconds=1500), "1500us"),
    (datetime.timedelta(seconds=1.5), "1.5s"),
    (datetime.timedelta(hours=48), "48h"),
    (datetime.timedelta(hours=1, minutes=30), "1h30m"),
    (datetime.timedelta(hours=1, seconds=0.25), "1h0.25s"),
    (30, "30s"),
    (0.2, "200ms"),
    ("5m", "5m"),
])
def test_duration(value: Any, want: str) -> None:
    assert rw.duration(value) == want


# --------------------------------------------------------------------------
# Needs


def test_needs_inferred_explicit_and_reduced() -> None:
    with workflow("needs") as wf:
        a = task("a", capability="core", action="echo", with_={})
        b = task("b", capability="core", action="echo", with_={"a": a.output})
        c = task("c", capability="core", action="echo", with_={"a": a.output, "b": b.output})  # a is upstream of b
        d = task("d", needs=[a, "c"], capability="core", action="echo", with_={"b": b.output})  # explicit kept
        e = task("e", capability="core", action="echo", when=c.output.ok, with_=f"{a.output} {d.output}")
        j = task("j", join=1, capability="core", action="echo", with_=[a.output, b.output])  # a join keeps all
        late = task("late", capability="core", action="echo", with_="${{ tasks.later.output }}")
        task("later", capability="core", action="echo", with_=None)
        task("own", capability="core", action="echo", when=tasks.own.output)  # compile error, not a need
    needs = {name: t.get("needs") for name, t in wf.to_dict()["tasks"].items()}
    assert needs == {"a": None, "b": ["a"], "c": ["b"], "d": ["a", "c"], "e": ["d"], "j": ["a", "b"],
                     "late": ["later"], "later": None, "own": None}
    assert [t.name for t in (a, b, c, d, e, j, late)] == ["a", "b", "c", "d", "e", "j", "late"]


def test_inputs_declared_and_inferred(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("inputs", description="d") as wf:
        wf.input("depth", int, default=2, description="How deep.")
        wf.input("must", "string", required=True)
        task("t", capability="core", action="echo", with_={"x": inputs.depth, "y": inputs.extra, "z": inputs.must})
    spec = wf.to_dict()
    assert spec["inputs"] == {"depth": {"type": "int", "default": 2, "description": "How deep."},
                              "must": {"type": "string", "required": True}, "extra": {"type": "any"}}
    report = compile_text(roboctl, tmp_path, wf.to_yaml(), "inputs.yaml")
    assert {i["name"]: i["required"] for i in report["inputs"]} == {"depth": False, "extra": True, "must": True}


def test_errors() -> None:
    with pytest.raises(RuntimeError, match="outside"):
        task("t", capability="core", action="echo")
    with pytest.raises(ValueError, match="workflow name"):
        workflow("Bad Name")
    with workflow("errs") as wf:
        with pytest.raises(ValueError, match="no hyphens"):
            task("a-b", capability="core", action="echo")
        task("a", capability="core", action="echo")
        with pytest.raises(ValueError, match="already has"):
            task("a", capability="core", action="echo")
        with pytest.raises(ValueError, match="on_failure"):
            task("b", capability="core", action="echo", on_failure="ignore")  # type: ignore[arg-type]
    assert list(wf.tasks) == ["a"]


def test_nested_workflows_and_child_by_object() -> None:
    with workflow("outer", 2) as outer:
        with workflow("inner", 3) as inner:
            task("x", capability="core", action="echo")
        task("y", workflow=inner, with_={})
    assert list(inner.tasks) == ["x"] and list(outer.tasks) == ["y"]
    assert outer.to_dict()["tasks"]["y"]["workflow"] == "inner@3"


# --------------------------------------------------------------------------
# The YAML emitter


TRICKY = [
    "", " ", "yes", "No", "on", "OFF", "y", "n", "null", "Null", "~", "true", "False", "0", "-1", "+1", "1e3",
    "0x1f", "0o7", "1_000", ".5", ".inf", "-.inf", ".nan", "nan", "inf", "2026-01-01", "2026-01-01T09:00:00Z",
    "12:30", "1:20:30", " lead", "trail ", "a: b", "a:b", "a #b", "a#b", "#x", "-", "--", "---", "...", "-c", "-x y",
    "?", "?q", ":x", "x:", "*a", "&b", "!t", "!!str", "|", ">", "%d", "@x", "`c`", "'q'", '"d"', "[x]", "{y}",
    "a,b", "a[0]", "{{ x }}", "http://x/y?a=1&b=2", "=", "<<", "<x>", "back\\slash", 'quote"s', "it's",
    "tab\there", "\ttab", "cr\rlf", "nul\x00", "bell\x07", "del\x7f", "c1\x85", "bom\ufeff", "ls\u2028",
    "é", "unicode é ✓ 🎉", "\u00a0nbsp", "one\ntwo", "one\ntwo\n", "one\ntwo\n\n", "\nlead", "  indented\nx",
    "x\n  indented\n", "blank\n\nline", "ws\n   \nline", "# not a comment\n- not a list\nkey: not a map\n",
    "trailing space \nx", "30s", "1h30m", "1.5s", "500ms", "1e5s", "1_0s", "0x1s", "\n", "\n\n", "a\tb\nc", "'${{' is not special here",
]


def test_emitter_reads_back_as_written() -> None:
    data = {
        "strings": TRICKY,
        "keys": {s: i for i, s in enumerate(TRICKY) if "\n" not in s},
        "numbers": [0, -7, 2**62, 0.1, 1e-05, 1e20, 2.0, -0.5, 1.5e300],
        "scalars": [True, False, None],
        "empty": {"list": [], "map": {}, "nested": [[], {}, [[]]]},
        "deep": [{"a": [1, {"b": [{"c": "d"}]}]}, [[1, 2], ["x", "y: z"]]],
        "long": ["word"] * 40,
    }
    text = rw.dump_yaml(data)
    assert yaml.safe_load(text) == data, text  # YAML 1.1
    assert load(text) == data, text  # YAML 1.2's core schema, as Go reads it


def test_emitter_is_what_the_compiler_reads(roboctl: str, tmp_path: pathlib.Path) -> None:
    with workflow("tricky", description="Strings that could be misread.") as wf:
        # ("${{" would start an expression, and the compiler refuses NUL.)
        strings = [s for s in TRICKY if "${{" not in s and "\x00" not in s]
        wf.input("default", "list", default=strings)
        task("t", capability="core", action="echo",
             with_={"strings": strings, "keys": {s: s for s in strings if s and "\n" not in s},
                    "numbers": [0, -7, 2**53, 0.1, 1e-05, 1e20, 2.0, -0.5], "scalars": [True, False, None]})
        wf.outputs["x"] = {"on": "yes"}
    from_yaml = compile_text(roboctl, tmp_path, wf.to_yaml(), "tricky.yaml")
    from_json = compile_text(roboctl, tmp_path, wf.to_json(), "tricky.json")
    assert from_yaml["ir_hash"] == from_json["ir_hash"], wf.to_yaml()


def test_yaml_is_readable() -> None:
    with workflow("hello", 1, description="Greets someone by name.") as wf:
        name = wf.input("name", str, default="world")
        greet = task("greet", capability="core", action="echo",
                     with_={"greeting": f"Hello, {name}!", "script": "line one\nline two\n"})
        wf.outputs["greeting"] = greet.output.greeting
    assert wf.to_yaml() == (
        "name: hello\n"
        "version: 1\n"
        "description: Greets someone by name.\n"
        "\n"
        "inputs:\n"
        "  name: {type: string, default: world}\n"
        "\n"
        "tasks:\n"
        "  greet:\n"
        "    capability: core\n"
        "    action: echo\n"
        "    with:\n"
        "      greeting: Hello, ${{ inputs.name }}!\n"
        "      script: |\n"
        "        line one\n"
        "        line two\n"
        "\n"
        "outputs:\n"
        "  greeting: ${{ tasks.greet.output.greeting }}\n"
    )


# --------------------------------------------------------------------------
# Types


def test_mypy_strict() -> None:
    mypy = shutil.which("mypy")
    if mypy is None:
        pytest.skip("mypy is not installed")
    proc = subprocess.run([mypy, "--strict", str(SDK / "robonet" / "workflows.py")],
                          capture_output=True, text=True, cwd=SDK)
    assert proc.returncode == 0, proc.stdout + proc.stderr
