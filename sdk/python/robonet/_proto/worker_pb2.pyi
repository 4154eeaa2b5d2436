from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServeRequest(_message.Message):
    __slots__ = ["beat", "done", "hello", "log"]
    BEAT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    beat: WorkerBeat
    done: WorkerDone
    hello: WorkerHello
    log: WorkerLog
    def __init__(self, hello: _Optional[_Union[WorkerHello, _Mapping]] = ..., beat: _Optional[_Union[WorkerBeat, _Mapping]] = ..., done: _Optional[_Union[WorkerDone, _Mapping]] = ..., log: _Optional[_Union[WorkerLog, _Mapping]] = ...) -> None: ...

class ServeResponse(_message.Message):
    __slots__ = ["cancel", "run", "welcome"]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    cancel: WorkerCancel
    run: WorkerRun
    welcome: WorkerWelcome
    def __init__(self, welcome: _Optional[_Union[WorkerWelcome, _Mapping]] = ..., run: _Optional[_Union[WorkerRun, _Mapping]] = ..., cancel: _Optional[_Union[WorkerCancel, _Mapping]] = ...) -> None: ...

class SlotProgress(_message.Message):
    __slots__ = ["attempt_id", "message", "slot", "steps_done", "steps_total"]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    STEPS_DONE_FIELD_NUMBER: _ClassVar[int]
    STEPS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    attempt_id: str
    message: str
    slot: int
    steps_done: int
    steps_total: int
    def __init__(self, slot: _Optional[int] = ..., attempt_id: _Optional[str] = ..., steps_done: _Optional[int] = ..., steps_total: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class WorkerBeat(_message.Message):
    __slots__ = ["running"]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    running: _containers.RepeatedCompositeFieldContainer[SlotProgress]
    def __init__(self, running: _Optional[_Iterable[_Union[SlotProgress, _Mapping]]] = ...) -> None: ...

class WorkerCancel(_message.Message):
    __slots__ = ["attempt_id", "slot"]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    attempt_id: str
    slot: int
    def __init__(self, slot: _Optional[int] = ..., attempt_id: _Optional[str] = ...) -> None: ...

class WorkerDone(_message.Message):
    __slots__ = ["attempt_id", "error", "ok", "output_json", "slot"]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    attempt_id: str
    error: str
    ok: bool
    output_json: bytes
    slot: int
    def __init__(self, slot: _Optional[int] = ..., attempt_id: _Optional[str] = ..., ok: bool = ..., output_json: _Optional[bytes] = ..., error: _Optional[str] = ...) -> None: ...

class WorkerHello(_message.Message):
    __slots__ = ["actions", "capability", "name", "slots"]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedScalarFieldContainer[str]
    capability: str
    name: str
    slots: int
    def __init__(self, name: _Optional[str] = ..., capability: _Optional[str] = ..., actions: _Optional[_Iterable[str]] = ..., slots: _Optional[int] = ...) -> None: ...

class WorkerLog(_message.Message):
    __slots__ = ["attempt_id", "lines", "slot", "stream"]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    attempt_id: str
    lines: _containers.RepeatedScalarFieldContainer[str]
    slot: int
    stream: str
    def __init__(self, slot: _Optional[int] = ..., attempt_id: _Optional[str] = ..., stream: _Optional[str] = ..., lines: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkerRun(_message.Message):
    __slots__ = ["action", "attempt", "attempt_id", "idempotency_key", "index", "input_json", "slot", "task", "timeout_ns", "workflow"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_NS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    action: str
    attempt: int
    attempt_id: str
    idempotency_key: str
    index: int
    input_json: bytes
    slot: int
    task: str
    timeout_ns: int
    workflow: str
    def __init__(self, slot: _Optional[int] = ..., attempt_id: _Optional[str] = ..., action: _Optional[str] = ..., input_json: _Optional[bytes] = ..., idempotency_key: _Optional[str] = ..., workflow: _Optional[str] = ..., task: _Optional[str] = ..., index: _Optional[int] = ..., attempt: _Optional[int] = ..., timeout_ns: _Optional[int] = ...) -> None: ...

class WorkerWelcome(_message.Message):
    __slots__ = ["heartbeat_interval_ns", "node"]
    HEARTBEAT_INTERVAL_NS_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    heartbeat_interval_ns: int
    node: str
    def __init__(self, node: _Optional[str] = ..., heartbeat_interval_ns: _Optional[int] = ...) -> None: ...
