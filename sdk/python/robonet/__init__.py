"""roboNet's Python SDK: serve a capability (Worker), and submit and follow workflows (Client).

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
]
