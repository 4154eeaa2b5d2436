"""roboNet's Python SDK: serve a capability (Worker), submit and follow workflows (Client), and write workflows in Python (workflow, task, inputs).

See docs/python.md.
"""

from robonet.client import Client, Event, Instance, InstanceSummary, LogLine, Submission, Task, WorkflowInfo
from robonet.errors import (
    ActionCancelled,
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    RobonetError,
    UnavailableError,
    WorkerRejectedError,
)
from robonet.worker import Context, Worker
from robonet.workflows import (
    Ref,
    Workflow,
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
    wait_until,
    workflow,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Context",
    "Worker",
    "Event",
    "Instance",
    "InstanceSummary",
    "LogLine",
    "Submission",
    "Task",
    "WorkflowInfo",
    "ActionCancelled",
    "AlreadyExistsError",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "NotFoundError",
    "RobonetError",
    "UnavailableError",
    "WorkerRejectedError",
    # Workflows in Python (robonet.workflows; its Task is robonet.workflows.Task).
    "Ref",
    "Workflow",
    "cond",
    "expr",
    "has",
    "index",
    "inputs",
    "item",
    "iteration",
    "output",
    "over",
    "previous",
    "retry_policy",
    "size",
    "task",
    "tasks",
    "until",
    "wait_for",
    "wait_signal",
    "wait_until",
    "workflow",
]
