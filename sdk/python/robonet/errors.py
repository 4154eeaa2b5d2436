"""Errors of the roboNet SDK.

A call the node refuses raises a :class:`RobonetError` (or one of its
subclasses, by gRPC status code) that keeps the status code and the
node's message::

    try:
        client.get("0b6f…")
    except NotFoundError as e:
        print(e.code, e.message)
"""

from __future__ import annotations

from typing import Optional

import grpc


class RobonetError(Exception):
    """A call the node answered with an error status.

    ``code`` is the :class:`grpc.StatusCode`, ``message`` the node's
    message (what is wrong, often with how to fix it).
    """

    def __init__(self, code: grpc.StatusCode, message: str, method: str = "") -> None:
        self.code = code
        self.message = message
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{code.name}: {message}")


class InvalidArgumentError(RobonetError):
    """INVALID_ARGUMENT: a spec that does not compile, inputs that do not bind, a malformed request."""


class NotFoundError(RobonetError):
    """NOT_FOUND: unknown workflow version, instance, task or attempt."""


class AlreadyExistsError(RobonetError):
    """ALREADY_EXISTS: a version registered with another definition, a reused idempotency key."""


class FailedPreconditionError(RobonetError):
    """FAILED_PRECONDITION: e.g. cancelling or signalling an instance that finished."""


class ResourceExhaustedError(RobonetError):
    """RESOURCE_EXHAUSTED: over a size or count limit of the node."""


class UnavailableError(RobonetError):
    """UNAVAILABLE: the node is unreachable or shutting down, or no leader is elected (retry)."""


class UnauthenticatedError(RobonetError):
    """UNAUTHENTICATED or PERMISSION_DENIED: a missing or wrong API token."""


class DeadlineExceededError(RobonetError):
    """DEADLINE_EXCEEDED: the call's timeout passed."""


_BY_CODE: dict[grpc.StatusCode, type[RobonetError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: UnauthenticatedError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}


def from_rpc_error(err: grpc.RpcError, method: str = "") -> RobonetError:
    """Converts a gRPC error into the matching :class:`RobonetError`."""
    code: Optional[grpc.StatusCode] = None
    message = str(err)
    if isinstance(err, grpc.Call):
        code = err.code()
        message = err.details() or ""
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    return _BY_CODE.get(code, RobonetError)(code, message, method)


class WorkerRejectedError(Exception):
    """The node refused the worker's hello (a bad name, capability, action or slot count): retrying cannot help."""


class ActionCancelled(Exception):
    """Raised inside an action (by ``ctx.progress`` and ``ctx.check``) once its attempt was cancelled or timed out.

    Let it propagate: the node already moved on, and the result is ignored.
    """
