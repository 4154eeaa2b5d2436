from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
ERROR_KIND_BUSY: ErrorKind
ERROR_KIND_NOT_RUNNING: ErrorKind
ERROR_KIND_NOT_WAGGLER: ErrorKind
ERROR_KIND_STALE_TERM: ErrorKind
ERROR_KIND_UNSPECIFIED: ErrorKind
OBSERVATION_KIND_ACCEPTED: ObservationKind
OBSERVATION_KIND_CHAIN_BREAK: ObservationKind
OBSERVATION_KIND_COMPLETED: ObservationKind
OBSERVATION_KIND_CPU: ObservationKind
OBSERVATION_KIND_FAILED: ObservationKind
OBSERVATION_KIND_HEARTBEAT: ObservationKind
OBSERVATION_KIND_LOST: ObservationKind
OBSERVATION_KIND_MEM: ObservationKind
OBSERVATION_KIND_REPLAY: ObservationKind
OBSERVATION_KIND_UNSPECIFIED: ObservationKind
OBSERVATION_KIND_VIOLATION: ObservationKind

class Assignment(_message.Message):
    __slots__ = ["dispatch", "generation"]
    DISPATCH_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    dispatch: Dispatch
    generation: int
    def __init__(self, dispatch: _Optional[_Union[Dispatch, _Mapping]] = ..., generation: _Optional[int] = ...) -> None: ...

class AttemptKey(_message.Message):
    __slots__ = ["attempt", "execution_id", "instance_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    execution_id: str
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class AttemptStarted(_message.Message):
    __slots__ = ["at_unix_ns", "capability", "epoch", "generation", "key", "worker_id"]
    AT_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    at_unix_ns: int
    capability: str
    epoch: int
    generation: int
    key: AttemptKey
    worker_id: str
    def __init__(self, key: _Optional[_Union[AttemptKey, _Mapping]] = ..., capability: _Optional[str] = ..., epoch: _Optional[int] = ..., worker_id: _Optional[str] = ..., generation: _Optional[int] = ..., at_unix_ns: _Optional[int] = ...) -> None: ...

class Dispatch(_message.Message):
    __slots__ = ["action", "avoid", "capability", "group", "index", "input_json", "key", "node", "task", "term", "timeout_ns", "verify", "workflow"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    AVOID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_NS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    action: str
    avoid: _containers.RepeatedScalarFieldContainer[str]
    capability: str
    group: str
    index: int
    input_json: bytes
    key: AttemptKey
    node: str
    task: str
    term: int
    timeout_ns: int
    verify: int
    workflow: str
    def __init__(self, key: _Optional[_Union[AttemptKey, _Mapping]] = ..., term: _Optional[int] = ..., workflow: _Optional[str] = ..., task: _Optional[str] = ..., index: _Optional[int] = ..., capability: _Optional[str] = ..., action: _Optional[str] = ..., input_json: _Optional[bytes] = ..., timeout_ns: _Optional[int] = ..., verify: _Optional[int] = ..., group: _Optional[str] = ..., avoid: _Optional[_Iterable[str]] = ..., node: _Optional[str] = ...) -> None: ...

class Handoff(_message.Message):
    __slots__ = ["dispatch", "epoch", "generation", "may_run", "worker_id"]
    DISPATCH_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    MAY_RUN_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    dispatch: Dispatch
    epoch: int
    generation: int
    may_run: bool
    worker_id: str
    def __init__(self, dispatch: _Optional[_Union[Dispatch, _Mapping]] = ..., epoch: _Optional[int] = ..., worker_id: _Optional[str] = ..., generation: _Optional[int] = ..., may_run: bool = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ["cpu_percent", "eta_ns", "generation", "key", "mem_bytes", "message", "sent_unix_ns", "seq", "steps_done", "steps_total", "worker_id"]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    ETA_NS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MEM_BYTES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SENT_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STEPS_DONE_FIELD_NUMBER: _ClassVar[int]
    STEPS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    cpu_percent: float
    eta_ns: int
    generation: int
    key: AttemptKey
    mem_bytes: int
    message: str
    sent_unix_ns: int
    seq: int
    steps_done: int
    steps_total: int
    worker_id: str
    def __init__(self, key: _Optional[_Union[AttemptKey, _Mapping]] = ..., generation: _Optional[int] = ..., worker_id: _Optional[str] = ..., seq: _Optional[int] = ..., steps_done: _Optional[int] = ..., steps_total: _Optional[int] = ..., eta_ns: _Optional[int] = ..., message: _Optional[str] = ..., cpu_percent: _Optional[float] = ..., mem_bytes: _Optional[int] = ..., sent_unix_ns: _Optional[int] = ...) -> None: ...

class LeadAck(_message.Message):
    __slots__ = ["seq"]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class LeadAnswer(_message.Message):
    __slots__ = ["attempt_errors", "error", "id"]
    class AttemptErrorsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: WagError
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[WagError, _Mapping]] = ...) -> None: ...
    ATTEMPT_ERRORS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    attempt_errors: _containers.MessageMap[int, WagError]
    error: WagError
    id: int
    def __init__(self, id: _Optional[int] = ..., error: _Optional[_Union[WagError, _Mapping]] = ..., attempt_errors: _Optional[_Mapping[int, WagError]] = ...) -> None: ...

class LeadCancel(_message.Message):
    __slots__ = ["id", "keys"]
    ID_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    id: int
    keys: _containers.RepeatedCompositeFieldContainer[AttemptKey]
    def __init__(self, id: _Optional[int] = ..., keys: _Optional[_Iterable[_Union[AttemptKey, _Mapping]]] = ...) -> None: ...

class LeadDispatch(_message.Message):
    __slots__ = ["handoffs", "id"]
    HANDOFFS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    handoffs: _containers.RepeatedCompositeFieldContainer[Handoff]
    id: int
    def __init__(self, id: _Optional[int] = ..., handoffs: _Optional[_Iterable[_Union[Handoff, _Mapping]]] = ...) -> None: ...

class LeadObservations(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Observation]
    def __init__(self, items: _Optional[_Iterable[_Union[Observation, _Mapping]]] = ...) -> None: ...

class LeadOpen(_message.Message):
    __slots__ = ["follower", "leader", "max_message_bytes", "partition_count", "partitions", "term"]
    class PartitionsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    FOLLOWER_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_COUNT_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    follower: bool
    leader: str
    max_message_bytes: int
    partition_count: int
    partitions: _containers.ScalarMap[int, int]
    term: int
    def __init__(self, term: _Optional[int] = ..., leader: _Optional[str] = ..., max_message_bytes: _Optional[int] = ..., follower: bool = ..., partition_count: _Optional[int] = ..., partitions: _Optional[_Mapping[int, int]] = ...) -> None: ...

class LeadProgress(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[WagProgress]
    def __init__(self, items: _Optional[_Iterable[_Union[WagProgress, _Mapping]]] = ...) -> None: ...

class LeadReady(_message.Message):
    __slots__ = ["max_message_bytes"]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    max_message_bytes: int
    def __init__(self, max_message_bytes: _Optional[int] = ...) -> None: ...

class LeadRequest(_message.Message):
    __slots__ = ["ack", "cancel", "dispatch", "open", "roles"]
    ACK_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    DISPATCH_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    ack: LeadAck
    cancel: LeadCancel
    dispatch: LeadDispatch
    open: LeadOpen
    roles: LeadRoles
    def __init__(self, open: _Optional[_Union[LeadOpen, _Mapping]] = ..., roles: _Optional[_Union[LeadRoles, _Mapping]] = ..., dispatch: _Optional[_Union[LeadDispatch, _Mapping]] = ..., cancel: _Optional[_Union[LeadCancel, _Mapping]] = ..., ack: _Optional[_Union[LeadAck, _Mapping]] = ...) -> None: ...

class LeadResponse(_message.Message):
    __slots__ = ["answer", "observations", "progress", "ready", "results", "stamp", "started"]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    STAMP_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    answer: LeadAnswer
    observations: LeadObservations
    progress: LeadProgress
    ready: LeadReady
    results: LeadResults
    stamp: Stamp
    started: LeadStarted
    def __init__(self, answer: _Optional[_Union[LeadAnswer, _Mapping]] = ..., results: _Optional[_Union[LeadResults, _Mapping]] = ..., progress: _Optional[_Union[LeadProgress, _Mapping]] = ..., started: _Optional[_Union[LeadStarted, _Mapping]] = ..., observations: _Optional[_Union[LeadObservations, _Mapping]] = ..., ready: _Optional[_Union[LeadReady, _Mapping]] = ..., stamp: _Optional[_Union[Stamp, _Mapping]] = ...) -> None: ...

class LeadResults(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[WagResult]
    def __init__(self, results: _Optional[_Iterable[_Union[WagResult, _Mapping]]] = ...) -> None: ...

class LeadRoles(_message.Message):
    __slots__ = ["id", "quarantined", "roles"]
    class RolesEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    id: int
    quarantined: _containers.RepeatedScalarFieldContainer[str]
    roles: _containers.ScalarMap[str, int]
    def __init__(self, id: _Optional[int] = ..., roles: _Optional[_Mapping[str, int]] = ..., quarantined: _Optional[_Iterable[str]] = ...) -> None: ...

class LeadStarted(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[AttemptStarted]
    def __init__(self, items: _Optional[_Iterable[_Union[AttemptStarted, _Mapping]]] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ["at_unix_ns", "capability", "count", "kind", "node", "value"]
    AT_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    at_unix_ns: int
    capability: str
    count: int
    kind: ObservationKind
    node: str
    value: float
    def __init__(self, node: _Optional[str] = ..., kind: _Optional[_Union[ObservationKind, str]] = ..., capability: _Optional[str] = ..., value: _Optional[float] = ..., count: _Optional[int] = ..., at_unix_ns: _Optional[int] = ...) -> None: ...

class Report(_message.Message):
    __slots__ = ["cancelled", "error", "finished_unix_ns", "generation", "key", "ok", "output_json", "seq", "started_unix_ns", "worker_id"]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINISHED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    error: str
    finished_unix_ns: int
    generation: int
    key: AttemptKey
    ok: bool
    output_json: bytes
    seq: int
    started_unix_ns: int
    worker_id: str
    def __init__(self, seq: _Optional[int] = ..., key: _Optional[_Union[AttemptKey, _Mapping]] = ..., generation: _Optional[int] = ..., worker_id: _Optional[str] = ..., ok: bool = ..., output_json: _Optional[bytes] = ..., error: _Optional[str] = ..., started_unix_ns: _Optional[int] = ..., finished_unix_ns: _Optional[int] = ..., cancelled: bool = ...) -> None: ...

class RunningAttempt(_message.Message):
    __slots__ = ["assignment", "started_unix_ns", "worker_id"]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    assignment: Assignment
    started_unix_ns: int
    worker_id: str
    def __init__(self, assignment: _Optional[_Union[Assignment, _Mapping]] = ..., worker_id: _Optional[str] = ..., started_unix_ns: _Optional[int] = ...) -> None: ...

class SlotAssignment(_message.Message):
    __slots__ = ["assignment", "worker_id"]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    assignment: Assignment
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., assignment: _Optional[_Union[Assignment, _Mapping]] = ...) -> None: ...

class SlotCancel(_message.Message):
    __slots__ = ["generation", "key", "worker_id"]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    generation: int
    key: AttemptKey
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., key: _Optional[_Union[AttemptKey, _Mapping]] = ..., generation: _Optional[int] = ...) -> None: ...

class Stamp(_message.Message):
    __slots__ = ["chain_id", "index", "next_anchor", "token"]
    CHAIN_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NEXT_ANCHOR_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    chain_id: int
    index: int
    next_anchor: bytes
    token: bytes
    def __init__(self, chain_id: _Optional[int] = ..., index: _Optional[int] = ..., token: _Optional[bytes] = ..., next_anchor: _Optional[bytes] = ...) -> None: ...

class WagError(_message.Message):
    __slots__ = ["kind", "message"]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    kind: ErrorKind
    message: str
    def __init__(self, kind: _Optional[_Union[ErrorKind, str]] = ..., message: _Optional[str] = ...) -> None: ...

class WagProgress(_message.Message):
    __slots__ = ["at_unix_ns", "cpu_percent", "eta_ns", "key", "mem_bytes", "message", "seq", "steps_done", "steps_total", "worker_id"]
    AT_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    ETA_NS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MEM_BYTES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STEPS_DONE_FIELD_NUMBER: _ClassVar[int]
    STEPS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    at_unix_ns: int
    cpu_percent: float
    eta_ns: int
    key: AttemptKey
    mem_bytes: int
    message: str
    seq: int
    steps_done: int
    steps_total: int
    worker_id: str
    def __init__(self, key: _Optional[_Union[AttemptKey, _Mapping]] = ..., worker_id: _Optional[str] = ..., seq: _Optional[int] = ..., steps_done: _Optional[int] = ..., steps_total: _Optional[int] = ..., eta_ns: _Optional[int] = ..., cpu_percent: _Optional[float] = ..., mem_bytes: _Optional[int] = ..., message: _Optional[str] = ..., at_unix_ns: _Optional[int] = ...) -> None: ...

class WagResult(_message.Message):
    __slots__ = ["error", "finished_unix_ns", "key", "ok", "output_json", "seq", "started_unix_ns", "worker_id"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINISHED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    error: str
    finished_unix_ns: int
    key: AttemptKey
    ok: bool
    output_json: bytes
    seq: int
    started_unix_ns: int
    worker_id: str
    def __init__(self, seq: _Optional[int] = ..., key: _Optional[_Union[AttemptKey, _Mapping]] = ..., ok: bool = ..., output_json: _Optional[bytes] = ..., error: _Optional[str] = ..., worker_id: _Optional[str] = ..., started_unix_ns: _Optional[int] = ..., finished_unix_ns: _Optional[int] = ...) -> None: ...

class WorkAck(_message.Message):
    __slots__ = ["seq"]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class WorkAssign(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[SlotAssignment]
    def __init__(self, items: _Optional[_Iterable[_Union[SlotAssignment, _Mapping]]] = ...) -> None: ...

class WorkCancel(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[SlotCancel]
    def __init__(self, items: _Optional[_Iterable[_Union[SlotCancel, _Mapping]]] = ...) -> None: ...

class WorkHeartbeats(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Heartbeat]
    def __init__(self, items: _Optional[_Iterable[_Union[Heartbeat, _Mapping]]] = ...) -> None: ...

class WorkLeave(_message.Message):
    __slots__ = ["workers"]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, workers: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkReady(_message.Message):
    __slots__ = ["max_message_bytes"]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    max_message_bytes: int
    def __init__(self, max_message_bytes: _Optional[int] = ...) -> None: ...

class WorkRegister(_message.Message):
    __slots__ = ["capability", "epoch", "max_message_bytes", "node", "running", "workers"]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    capability: str
    epoch: int
    max_message_bytes: int
    node: str
    running: _containers.RepeatedCompositeFieldContainer[RunningAttempt]
    workers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node: _Optional[str] = ..., capability: _Optional[str] = ..., epoch: _Optional[int] = ..., workers: _Optional[_Iterable[str]] = ..., running: _Optional[_Iterable[_Union[RunningAttempt, _Mapping]]] = ..., max_message_bytes: _Optional[int] = ...) -> None: ...

class WorkReports(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Report]
    def __init__(self, items: _Optional[_Iterable[_Union[Report, _Mapping]]] = ...) -> None: ...

class WorkRequest(_message.Message):
    __slots__ = ["heartbeats", "leave", "register", "reports", "stamp"]
    HEARTBEATS_FIELD_NUMBER: _ClassVar[int]
    LEAVE_FIELD_NUMBER: _ClassVar[int]
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    STAMP_FIELD_NUMBER: _ClassVar[int]
    heartbeats: WorkHeartbeats
    leave: WorkLeave
    register: WorkRegister
    reports: WorkReports
    stamp: Stamp
    def __init__(self, register: _Optional[_Union[WorkRegister, _Mapping]] = ..., heartbeats: _Optional[_Union[WorkHeartbeats, _Mapping]] = ..., reports: _Optional[_Union[WorkReports, _Mapping]] = ..., leave: _Optional[_Union[WorkLeave, _Mapping]] = ..., stamp: _Optional[_Union[Stamp, _Mapping]] = ...) -> None: ...

class WorkResponse(_message.Message):
    __slots__ = ["ack", "assign", "cancel", "ready"]
    ACK_FIELD_NUMBER: _ClassVar[int]
    ASSIGN_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    ack: WorkAck
    assign: WorkAssign
    cancel: WorkCancel
    ready: WorkReady
    def __init__(self, assign: _Optional[_Union[WorkAssign, _Mapping]] = ..., cancel: _Optional[_Union[WorkCancel, _Mapping]] = ..., ack: _Optional[_Union[WorkAck, _Mapping]] = ..., ready: _Optional[_Union[WorkReady, _Mapping]] = ...) -> None: ...

class ObservationKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ErrorKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
