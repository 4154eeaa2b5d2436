from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
EVENT_KIND_PAUSED: EventKind
EVENT_KIND_RESUMED: EventKind
EVENT_KIND_RETRIED: EventKind
EVENT_KIND_SIGNAL: EventKind
EVENT_KIND_SNAPSHOT: EventKind
EVENT_KIND_STATE: EventKind
EVENT_KIND_TASK_CANCELLED: EventKind
EVENT_KIND_TASK_COMPLETED: EventKind
EVENT_KIND_TASK_FAILED: EventKind
EVENT_KIND_TASK_PROGRESS: EventKind
EVENT_KIND_TASK_RETRYING: EventKind
EVENT_KIND_TASK_SKIPPED: EventKind
EVENT_KIND_TASK_STARTED: EventKind
EVENT_KIND_UNSPECIFIED: EventKind
INSTANCE_STATE_CANCELLED: InstanceState
INSTANCE_STATE_COMPLETE: InstanceState
INSTANCE_STATE_FAILED: InstanceState
INSTANCE_STATE_GATHERING: InstanceState
INSTANCE_STATE_PAUSED: InstanceState
INSTANCE_STATE_PENDING: InstanceState
INSTANCE_STATE_RUNNING: InstanceState
INSTANCE_STATE_UNSPECIFIED: InstanceState
KEYRING_OP_INSTALL: KeyringOp
KEYRING_OP_LIST: KeyringOp
KEYRING_OP_REMOVE: KeyringOp
KEYRING_OP_UNSPECIFIED: KeyringOp
KEYRING_OP_USE: KeyringOp
LOG_STREAM_NOTE: LogStream
LOG_STREAM_STDERR: LogStream
LOG_STREAM_STDOUT: LogStream
LOG_STREAM_UNSPECIFIED: LogStream
QUARANTINE_OP_ADD: QuarantineOp
QUARANTINE_OP_LIST: QuarantineOp
QUARANTINE_OP_RELEASE: QuarantineOp
QUARANTINE_OP_UNSPECIFIED: QuarantineOp
TASK_STATUS_CANCELLED: TaskStatus
TASK_STATUS_COMPLETED: TaskStatus
TASK_STATUS_FAILED: TaskStatus
TASK_STATUS_RETRYING: TaskStatus
TASK_STATUS_RUNNING: TaskStatus
TASK_STATUS_SKIPPED: TaskStatus
TASK_STATUS_UNSPECIFIED: TaskStatus
TASK_STATUS_WAITING: TaskStatus

class CancelInstanceRequest(_message.Message):
    __slots__ = ["instance_id"]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class CancelInstanceResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CreateScheduleRequest(_message.Message):
    __slots__ = ["allow_duplicate", "cron", "inputs_json", "interval", "jitter", "name", "workflow"]
    ALLOW_DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    INPUTS_JSON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    allow_duplicate: bool
    cron: str
    inputs_json: str
    interval: _duration_pb2.Duration
    jitter: _duration_pb2.Duration
    name: str
    workflow: WorkflowRef
    def __init__(self, name: _Optional[str] = ..., workflow: _Optional[_Union[WorkflowRef, _Mapping]] = ..., inputs_json: _Optional[str] = ..., cron: _Optional[str] = ..., interval: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., jitter: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., allow_duplicate: bool = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: ScheduleInfo
    def __init__(self, schedule: _Optional[_Union[ScheduleInfo, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Event(_message.Message):
    __slots__ = ["attempt", "error", "index", "instance", "iteration", "kind", "output_json", "progress", "retry_at", "run", "seq", "signal", "state", "task", "time"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    error: str
    index: int
    instance: Instance
    iteration: bool
    kind: EventKind
    output_json: str
    progress: TaskProgress
    retry_at: _timestamp_pb2.Timestamp
    run: int
    seq: int
    signal: Signal
    state: InstanceState
    task: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, seq: _Optional[int] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[_Union[EventKind, str]] = ..., state: _Optional[_Union[InstanceState, str]] = ..., task: _Optional[str] = ..., index: _Optional[int] = ..., attempt: _Optional[int] = ..., output_json: _Optional[str] = ..., error: _Optional[str] = ..., retry_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., progress: _Optional[_Union[TaskProgress, _Mapping]] = ..., instance: _Optional[_Union[Instance, _Mapping]] = ..., iteration: bool = ..., signal: _Optional[_Union[Signal, _Mapping]] = ..., run: _Optional[int] = ...) -> None: ...

class EventStart(_message.Message):
    __slots__ = ["existing", "instance_id", "version", "workflow"]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    existing: bool
    instance_id: str
    version: int
    workflow: str
    def __init__(self, workflow: _Optional[str] = ..., version: _Optional[int] = ..., instance_id: _Optional[str] = ..., existing: bool = ...) -> None: ...

class GetInstanceRequest(_message.Message):
    __slots__ = ["instance_id"]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class GetInstanceResponse(_message.Message):
    __slots__ = ["instance"]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    instance: Instance
    def __init__(self, instance: _Optional[_Union[Instance, _Mapping]] = ...) -> None: ...

class GetLeaderRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetLeaderResponse(_message.Message):
    __slots__ = ["answered_by", "grpc_addr", "name", "term"]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    answered_by: str
    grpc_addr: str
    name: str
    term: int
    def __init__(self, name: _Optional[str] = ..., grpc_addr: _Optional[str] = ..., term: _Optional[int] = ..., answered_by: _Optional[str] = ...) -> None: ...

class InlineSpec(_message.Message):
    __slots__ = ["filename", "source"]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    filename: str
    source: bytes
    def __init__(self, source: _Optional[bytes] = ..., filename: _Optional[str] = ...) -> None: ...

class Instance(_message.Message):
    __slots__ = ["cancel_requested", "created_at", "error", "eta", "finished_at", "id", "inputs_json", "outputs_json", "parent", "paused", "progress", "run", "signals", "started_at", "state", "tasks", "version", "workflow"]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ETA_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_JSON_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    cancel_requested: bool
    created_at: _timestamp_pb2.Timestamp
    error: str
    eta: _duration_pb2.Duration
    finished_at: _timestamp_pb2.Timestamp
    id: str
    inputs_json: str
    outputs_json: str
    parent: InstanceParent
    paused: bool
    progress: InstanceProgress
    run: int
    signals: _containers.RepeatedCompositeFieldContainer[Signal]
    started_at: _timestamp_pb2.Timestamp
    state: InstanceState
    tasks: _containers.RepeatedCompositeFieldContainer[TaskState]
    version: int
    workflow: str
    def __init__(self, id: _Optional[str] = ..., workflow: _Optional[str] = ..., version: _Optional[int] = ..., state: _Optional[_Union[InstanceState, str]] = ..., inputs_json: _Optional[str] = ..., outputs_json: _Optional[str] = ..., error: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: bool = ..., tasks: _Optional[_Iterable[_Union[TaskState, _Mapping]]] = ..., progress: _Optional[_Union[InstanceProgress, _Mapping]] = ..., eta: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., parent: _Optional[_Union[InstanceParent, _Mapping]] = ..., paused: bool = ..., run: _Optional[int] = ..., signals: _Optional[_Iterable[_Union[Signal, _Mapping]]] = ...) -> None: ...

class InstanceParent(_message.Message):
    __slots__ = ["attempt", "execution", "instance_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    execution: str
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ..., execution: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class InstanceProgress(_message.Message):
    __slots__ = ["done", "failed", "running", "skipped", "total", "unexpanded"]
    DONE_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    UNEXPANDED_FIELD_NUMBER: _ClassVar[int]
    done: int
    failed: int
    running: int
    skipped: int
    total: int
    unexpanded: int
    def __init__(self, total: _Optional[int] = ..., done: _Optional[int] = ..., running: _Optional[int] = ..., failed: _Optional[int] = ..., skipped: _Optional[int] = ..., unexpanded: _Optional[int] = ...) -> None: ...

class InstanceSummary(_message.Message):
    __slots__ = ["created_at", "error", "finished_at", "id", "parent_instance_id", "state", "version", "workflow"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    error: str
    finished_at: _timestamp_pb2.Timestamp
    id: str
    parent_instance_id: str
    state: InstanceState
    version: int
    workflow: str
    def __init__(self, id: _Optional[str] = ..., workflow: _Optional[str] = ..., version: _Optional[int] = ..., state: _Optional[_Union[InstanceState, str]] = ..., error: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., parent_instance_id: _Optional[str] = ...) -> None: ...

class KeyringRequest(_message.Message):
    __slots__ = ["key", "local_only", "op"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LOCAL_ONLY_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    local_only: bool
    op: KeyringOp
    def __init__(self, op: _Optional[_Union[KeyringOp, str]] = ..., key: _Optional[bytes] = ..., local_only: bool = ...) -> None: ...

class KeyringResponse(_message.Message):
    __slots__ = ["nodes"]
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeKeyring]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeKeyring, _Mapping]]] = ...) -> None: ...

class ListInstancesRequest(_message.Message):
    __slots__ = ["created_after", "id_prefix", "page_size", "page_token", "states", "workflow"]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    ID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    created_after: _timestamp_pb2.Timestamp
    id_prefix: str
    page_size: int
    page_token: str
    states: _containers.RepeatedScalarFieldContainer[InstanceState]
    workflow: str
    def __init__(self, workflow: _Optional[str] = ..., states: _Optional[_Iterable[_Union[InstanceState, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., id_prefix: _Optional[str] = ..., created_after: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListInstancesResponse(_message.Message):
    __slots__ = ["instances", "next_page_token"]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    instances: _containers.RepeatedCompositeFieldContainer[InstanceSummary]
    next_page_token: str
    def __init__(self, instances: _Optional[_Iterable[_Union[InstanceSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListMembersRequest(_message.Message):
    __slots__ = ["pools"]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    pools: bool
    def __init__(self, pools: bool = ...) -> None: ...

class ListMembersResponse(_message.Message):
    __slots__ = ["answered_by", "members"]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    answered_by: str
    members: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., answered_by: _Optional[str] = ...) -> None: ...

class ListPartitionsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListPartitionsResponse(_message.Message):
    __slots__ = ["answered_by", "count", "partitions", "placement"]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    answered_by: str
    count: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionInfo]
    placement: str
    def __init__(self, count: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionInfo, _Mapping]]] = ..., answered_by: _Optional[str] = ..., placement: _Optional[str] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ["schedules"]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[ScheduleInfo]
    def __init__(self, schedules: _Optional[_Iterable[_Union[ScheduleInfo, _Mapping]]] = ...) -> None: ...

class ListTrustRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListTrustResponse(_message.Message):
    __slots__ = ["answered_by", "dispatch_tier", "nodes"]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    DISPATCH_TIER_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    answered_by: str
    dispatch_tier: str
    nodes: _containers.RepeatedCompositeFieldContainer[NodeTrust]
    def __init__(self, dispatch_tier: _Optional[str] = ..., nodes: _Optional[_Iterable[_Union[NodeTrust, _Mapping]]] = ..., answered_by: _Optional[str] = ...) -> None: ...

class ListWagglersRequest(_message.Message):
    __slots__ = ["roles_only"]
    ROLES_ONLY_FIELD_NUMBER: _ClassVar[int]
    roles_only: bool
    def __init__(self, roles_only: bool = ...) -> None: ...

class ListWagglersResponse(_message.Message):
    __slots__ = ["answered_by", "source", "wagglers"]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    WAGGLERS_FIELD_NUMBER: _ClassVar[int]
    answered_by: str
    source: str
    wagglers: _containers.RepeatedCompositeFieldContainer[WagglerRole]
    def __init__(self, wagglers: _Optional[_Iterable[_Union[WagglerRole, _Mapping]]] = ..., answered_by: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class ListWorkflowsRequest(_message.Message):
    __slots__ = ["limit", "name"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    limit: int
    name: str
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListWorkflowsResponse(_message.Message):
    __slots__ = ["workflows"]
    WORKFLOWS_FIELD_NUMBER: _ClassVar[int]
    workflows: _containers.RepeatedCompositeFieldContainer[WorkflowInfo]
    def __init__(self, workflows: _Optional[_Iterable[_Union[WorkflowInfo, _Mapping]]] = ...) -> None: ...

class LocalPartitionsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class LocalPartitionsResponse(_message.Message):
    __slots__ = ["partitions"]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionInfo]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionInfo, _Mapping]]] = ...) -> None: ...

class LocalPoolsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class LocalPoolsResponse(_message.Message):
    __slots__ = ["answered_by", "pools"]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    answered_by: str
    pools: _containers.RepeatedCompositeFieldContainer[PoolStats]
    def __init__(self, pools: _Optional[_Iterable[_Union[PoolStats, _Mapping]]] = ..., answered_by: _Optional[str] = ...) -> None: ...

class LocalWaggler(_message.Message):
    __slots__ = ["capability", "epoch", "failovers", "queued", "replays_ignored", "running", "state", "workers"]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FAILOVERS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    REPLAYS_IGNORED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    capability: str
    epoch: int
    failovers: int
    queued: int
    replays_ignored: int
    running: int
    state: str
    workers: int
    def __init__(self, capability: _Optional[str] = ..., epoch: _Optional[int] = ..., state: _Optional[str] = ..., queued: _Optional[int] = ..., running: _Optional[int] = ..., workers: _Optional[int] = ..., failovers: _Optional[int] = ..., replays_ignored: _Optional[int] = ...) -> None: ...

class LocalWagglersRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class LocalWagglersResponse(_message.Message):
    __slots__ = ["answered_by", "wagglers"]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    WAGGLERS_FIELD_NUMBER: _ClassVar[int]
    answered_by: str
    wagglers: _containers.RepeatedCompositeFieldContainer[LocalWaggler]
    def __init__(self, wagglers: _Optional[_Iterable[_Union[LocalWaggler, _Mapping]]] = ..., answered_by: _Optional[str] = ...) -> None: ...

class LogLine(_message.Message):
    __slots__ = ["stream", "text", "time"]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    stream: LogStream
    text: bytes
    time: _timestamp_pb2.Timestamp
    def __init__(self, stream: _Optional[_Union[LogStream, str]] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., text: _Optional[bytes] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ["capabilities", "gossip_addr", "grpc_addr", "leader", "name", "pools", "pools_at", "pools_note", "raft_addr", "roles", "status", "version", "voter", "wagglers"]
    class CapabilitiesEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class WagglersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    GOSSIP_ADDR_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    POOLS_AT_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    POOLS_NOTE_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDR_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VOTER_FIELD_NUMBER: _ClassVar[int]
    WAGGLERS_FIELD_NUMBER: _ClassVar[int]
    capabilities: _containers.ScalarMap[str, int]
    gossip_addr: str
    grpc_addr: str
    leader: bool
    name: str
    pools: _containers.RepeatedCompositeFieldContainer[PoolStats]
    pools_at: _timestamp_pb2.Timestamp
    pools_note: str
    raft_addr: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    status: str
    version: str
    voter: bool
    wagglers: _containers.ScalarMap[str, int]
    def __init__(self, name: _Optional[str] = ..., status: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., capabilities: _Optional[_Mapping[str, int]] = ..., grpc_addr: _Optional[str] = ..., gossip_addr: _Optional[str] = ..., raft_addr: _Optional[str] = ..., leader: bool = ..., voter: bool = ..., version: _Optional[str] = ..., wagglers: _Optional[_Mapping[str, int]] = ..., pools: _Optional[_Iterable[_Union[PoolStats, _Mapping]]] = ..., pools_note: _Optional[str] = ..., pools_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class NodeKeyring(_message.Message):
    __slots__ = ["error", "fingerprints", "node"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINTS_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    error: str
    fingerprints: _containers.RepeatedScalarFieldContainer[str]
    node: str
    def __init__(self, node: _Optional[str] = ..., error: _Optional[str] = ..., fingerprints: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeTrust(_message.Message):
    __slots__ = ["bad", "betrayed", "evidence", "good", "node", "pretrusted", "score", "self", "since", "tier"]
    class EvidenceEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    BAD_FIELD_NUMBER: _ClassVar[int]
    BETRAYED_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    GOOD_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PRETRUSTED_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SELF_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    bad: float
    betrayed: str
    evidence: _containers.ScalarMap[str, int]
    good: float
    node: str
    pretrusted: bool
    score: float
    self: bool
    since: _timestamp_pb2.Timestamp
    tier: str
    def __init__(self, node: _Optional[str] = ..., tier: _Optional[str] = ..., score: _Optional[float] = ..., good: _Optional[float] = ..., bad: _Optional[float] = ..., evidence: _Optional[_Mapping[str, int]] = ..., betrayed: _Optional[str] = ..., pretrusted: bool = ..., self: bool = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PartitionInfo(_message.Message):
    __slots__ = ["epoch", "has_stats", "instances_held", "moved_at_unix_nanos", "owner", "partition", "reason", "tasks_per_second", "tasks_total", "term", "writes_refused"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HAS_STATS_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_HELD_FIELD_NUMBER: _ClassVar[int]
    MOVED_AT_UNIX_NANOS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TASKS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    TASKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    WRITES_REFUSED_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    has_stats: bool
    instances_held: int
    moved_at_unix_nanos: int
    owner: str
    partition: int
    reason: str
    tasks_per_second: float
    tasks_total: int
    term: int
    writes_refused: int
    def __init__(self, partition: _Optional[int] = ..., owner: _Optional[str] = ..., epoch: _Optional[int] = ..., term: _Optional[int] = ..., moved_at_unix_nanos: _Optional[int] = ..., reason: _Optional[str] = ..., has_stats: bool = ..., instances_held: _Optional[int] = ..., tasks_total: _Optional[int] = ..., tasks_per_second: _Optional[float] = ..., writes_refused: _Optional[int] = ...) -> None: ...

class PauseInstanceRequest(_message.Message):
    __slots__ = ["instance_id"]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class PauseInstanceResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class PauseWorkflowRequest(_message.Message):
    __slots__ = ["resume", "workflow"]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    resume: bool
    workflow: str
    def __init__(self, workflow: _Optional[str] = ..., resume: bool = ...) -> None: ...

class PauseWorkflowResponse(_message.Message):
    __slots__ = ["errors", "instance_ids"]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_IDS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedScalarFieldContainer[str]
    instance_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, instance_ids: _Optional[_Iterable[str]] = ..., errors: _Optional[_Iterable[str]] = ...) -> None: ...

class PoolStats(_message.Message):
    __slots__ = ["busy", "capability", "completed", "failed", "latency_p50", "latency_p99", "per_minute", "pool", "slots"]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P50_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P99_FIELD_NUMBER: _ClassVar[int]
    PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    busy: int
    capability: str
    completed: int
    failed: int
    latency_p50: _duration_pb2.Duration
    latency_p99: _duration_pb2.Duration
    per_minute: int
    pool: str
    slots: int
    def __init__(self, capability: _Optional[str] = ..., pool: _Optional[str] = ..., slots: _Optional[int] = ..., busy: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ..., per_minute: _Optional[int] = ..., latency_p50: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., latency_p99: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class PublishEventRequest(_message.Message):
    __slots__ = ["idempotency_key", "name", "payload_json"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    name: str
    payload_json: str
    def __init__(self, name: _Optional[str] = ..., payload_json: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class PublishEventResponse(_message.Message):
    __slots__ = ["started"]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    started: _containers.RepeatedCompositeFieldContainer[EventStart]
    def __init__(self, started: _Optional[_Iterable[_Union[EventStart, _Mapping]]] = ...) -> None: ...

class QuarantineRequest(_message.Message):
    __slots__ = ["node", "op", "reason"]
    NODE_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    node: str
    op: QuarantineOp
    reason: str
    def __init__(self, op: _Optional[_Union[QuarantineOp, str]] = ..., node: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class QuarantineResponse(_message.Message):
    __slots__ = ["answered_by", "nodes"]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    answered_by: str
    nodes: _containers.RepeatedCompositeFieldContainer[QuarantinedNode]
    def __init__(self, nodes: _Optional[_Iterable[_Union[QuarantinedNode, _Mapping]]] = ..., answered_by: _Optional[str] = ...) -> None: ...

class QuarantinedNode(_message.Message):
    __slots__ = ["manual", "node", "reason", "since"]
    MANUAL_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    manual: bool
    node: str
    reason: str
    since: _timestamp_pb2.Timestamp
    def __init__(self, node: _Optional[str] = ..., reason: _Optional[str] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., manual: bool = ...) -> None: ...

class RegisterWorkflowRequest(_message.Message):
    __slots__ = ["spec"]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: InlineSpec
    def __init__(self, spec: _Optional[_Union[InlineSpec, _Mapping]] = ...) -> None: ...

class RegisterWorkflowResponse(_message.Message):
    __slots__ = ["existing", "workflow"]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    existing: bool
    workflow: WorkflowInfo
    def __init__(self, workflow: _Optional[_Union[WorkflowInfo, _Mapping]] = ..., existing: bool = ...) -> None: ...

class ResumeInstanceRequest(_message.Message):
    __slots__ = ["instance_id"]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class ResumeInstanceResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RetryInstanceRequest(_message.Message):
    __slots__ = ["from_task", "instance_id"]
    FROM_TASK_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    from_task: str
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ..., from_task: _Optional[str] = ...) -> None: ...

class RetryInstanceResponse(_message.Message):
    __slots__ = ["run", "tasks"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    run: int
    tasks: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run: _Optional[int] = ..., tasks: _Optional[_Iterable[str]] = ...) -> None: ...

class ScheduleInfo(_message.Message):
    __slots__ = ["allow_duplicate", "created_at", "cron", "inputs_json", "interval", "jitter", "last_instance_id", "last_run_at", "last_skipped", "name", "next_run_at", "paused", "workflow"]
    ALLOW_DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    INPUTS_JSON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    LAST_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    allow_duplicate: bool
    created_at: _timestamp_pb2.Timestamp
    cron: str
    inputs_json: str
    interval: _duration_pb2.Duration
    jitter: _duration_pb2.Duration
    last_instance_id: str
    last_run_at: _timestamp_pb2.Timestamp
    last_skipped: str
    name: str
    next_run_at: _timestamp_pb2.Timestamp
    paused: bool
    workflow: WorkflowRef
    def __init__(self, name: _Optional[str] = ..., workflow: _Optional[_Union[WorkflowRef, _Mapping]] = ..., inputs_json: _Optional[str] = ..., cron: _Optional[str] = ..., interval: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., jitter: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., allow_duplicate: bool = ..., paused: bool = ..., next_run_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_run_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_instance_id: _Optional[str] = ..., last_skipped: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Signal(_message.Message):
    __slots__ = ["at", "by", "consumed", "name", "payload_json", "seq"]
    AT_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    by: str
    consumed: bool
    name: str
    payload_json: str
    seq: int
    def __init__(self, seq: _Optional[int] = ..., name: _Optional[str] = ..., payload_json: _Optional[str] = ..., at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., consumed: bool = ..., by: _Optional[str] = ...) -> None: ...

class SignalInstanceRequest(_message.Message):
    __slots__ = ["idempotency_key", "instance_id", "name", "payload_json"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    instance_id: str
    name: str
    payload_json: str
    def __init__(self, instance_id: _Optional[str] = ..., name: _Optional[str] = ..., payload_json: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SignalInstanceResponse(_message.Message):
    __slots__ = ["delivered", "duplicate", "seq"]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    delivered: bool
    duplicate: bool
    seq: int
    def __init__(self, seq: _Optional[int] = ..., duplicate: bool = ..., delivered: bool = ...) -> None: ...

class SpecError(_message.Message):
    __slots__ = ["column", "field", "file", "hint", "line", "message", "task", "text"]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    column: int
    field: str
    file: str
    hint: str
    line: int
    message: str
    task: str
    text: str
    def __init__(self, file: _Optional[str] = ..., line: _Optional[int] = ..., column: _Optional[int] = ..., task: _Optional[str] = ..., field: _Optional[str] = ..., message: _Optional[str] = ..., hint: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class SpecErrors(_message.Message):
    __slots__ = ["errors"]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedCompositeFieldContainer[SpecError]
    def __init__(self, errors: _Optional[_Iterable[_Union[SpecError, _Mapping]]] = ...) -> None: ...

class SubmitItem(_message.Message):
    __slots__ = ["deadline", "idempotency_key", "inputs_json"]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INPUTS_JSON_FIELD_NUMBER: _ClassVar[int]
    deadline: _duration_pb2.Duration
    idempotency_key: str
    inputs_json: str
    def __init__(self, inputs_json: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., deadline: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SubmitWorkflowRequest(_message.Message):
    __slots__ = ["deadline", "dev", "idempotency_key", "inputs_json", "ref", "spec"]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    DEV_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INPUTS_JSON_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    deadline: _duration_pb2.Duration
    dev: bool
    idempotency_key: str
    inputs_json: str
    ref: WorkflowRef
    spec: InlineSpec
    def __init__(self, ref: _Optional[_Union[WorkflowRef, _Mapping]] = ..., spec: _Optional[_Union[InlineSpec, _Mapping]] = ..., inputs_json: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., deadline: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., dev: bool = ...) -> None: ...

class SubmitWorkflowResponse(_message.Message):
    __slots__ = ["existing", "instance_id", "warnings", "workflow"]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    existing: bool
    instance_id: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    workflow: WorkflowInfo
    def __init__(self, instance_id: _Optional[str] = ..., workflow: _Optional[_Union[WorkflowInfo, _Mapping]] = ..., existing: bool = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class SubmitWorkflowsRequest(_message.Message):
    __slots__ = ["items", "ref", "spec"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[SubmitItem]
    ref: WorkflowRef
    spec: InlineSpec
    def __init__(self, ref: _Optional[_Union[WorkflowRef, _Mapping]] = ..., spec: _Optional[_Union[InlineSpec, _Mapping]] = ..., items: _Optional[_Iterable[_Union[SubmitItem, _Mapping]]] = ...) -> None: ...

class SubmitWorkflowsResponse(_message.Message):
    __slots__ = ["instances", "warnings", "workflow"]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    instances: _containers.RepeatedCompositeFieldContainer[SubmittedInstance]
    warnings: _containers.RepeatedScalarFieldContainer[str]
    workflow: WorkflowInfo
    def __init__(self, workflow: _Optional[_Union[WorkflowInfo, _Mapping]] = ..., instances: _Optional[_Iterable[_Union[SubmittedInstance, _Mapping]]] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class SubmittedInstance(_message.Message):
    __slots__ = ["existing", "instance_id"]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    existing: bool
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ..., existing: bool = ...) -> None: ...

class TaskAttempt(_message.Message):
    __slots__ = ["attempt", "child_instance_id", "error", "finished_at", "index", "node", "ok", "running", "started_at", "worker"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CHILD_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    child_instance_id: str
    error: str
    finished_at: _timestamp_pb2.Timestamp
    index: int
    node: str
    ok: bool
    running: bool
    started_at: _timestamp_pb2.Timestamp
    worker: str
    def __init__(self, index: _Optional[int] = ..., attempt: _Optional[int] = ..., node: _Optional[str] = ..., worker: _Optional[str] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., running: bool = ..., ok: bool = ..., error: _Optional[str] = ..., child_instance_id: _Optional[str] = ...) -> None: ...

class TaskLogsRequest(_message.Message):
    __slots__ = ["attempt", "follow", "instance_id", "node", "task"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    follow: bool
    instance_id: str
    node: str
    task: str
    def __init__(self, instance_id: _Optional[str] = ..., task: _Optional[str] = ..., attempt: _Optional[int] = ..., follow: bool = ..., node: _Optional[str] = ...) -> None: ...

class TaskLogsResponse(_message.Message):
    __slots__ = ["attempt", "lines", "node", "task"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    lines: _containers.RepeatedCompositeFieldContainer[LogLine]
    node: str
    task: str
    def __init__(self, task: _Optional[str] = ..., attempt: _Optional[int] = ..., node: _Optional[str] = ..., lines: _Optional[_Iterable[_Union[LogLine, _Mapping]]] = ...) -> None: ...

class TaskProgress(_message.Message):
    __slots__ = ["at", "attempt", "cpu_percent", "eta", "execution_id", "mem_bytes", "message", "seq", "steps_done", "steps_total", "worker_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    ETA_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    MEM_BYTES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STEPS_DONE_FIELD_NUMBER: _ClassVar[int]
    STEPS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    attempt: int
    cpu_percent: float
    eta: _duration_pb2.Duration
    execution_id: str
    mem_bytes: int
    message: str
    seq: int
    steps_done: int
    steps_total: int
    worker_id: str
    def __init__(self, attempt: _Optional[int] = ..., execution_id: _Optional[str] = ..., worker_id: _Optional[str] = ..., seq: _Optional[int] = ..., steps_done: _Optional[int] = ..., steps_total: _Optional[int] = ..., eta: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., cpu_percent: _Optional[float] = ..., mem_bytes: _Optional[int] = ..., message: _Optional[str] = ..., at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TaskState(_message.Message):
    __slots__ = ["action", "attempt", "attempts", "attempts_omitted", "capability", "done", "error", "failed", "finished_at", "iterations", "loop", "max_attempts", "name", "needs", "output_json", "progress", "spread", "started_at", "status", "wait_signal", "wait_until", "waiting", "width", "workflow", "workflow_version"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_OMITTED_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    LOOP_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEEDS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    WAIT_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    WAIT_UNTIL_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_VERSION_FIELD_NUMBER: _ClassVar[int]
    action: str
    attempt: int
    attempts: _containers.RepeatedCompositeFieldContainer[TaskAttempt]
    attempts_omitted: int
    capability: str
    done: int
    error: str
    failed: int
    finished_at: _timestamp_pb2.Timestamp
    iterations: int
    loop: bool
    max_attempts: int
    name: str
    needs: _containers.RepeatedScalarFieldContainer[str]
    output_json: str
    progress: TaskProgress
    spread: bool
    started_at: _timestamp_pb2.Timestamp
    status: TaskStatus
    wait_signal: str
    wait_until: _timestamp_pb2.Timestamp
    waiting: bool
    width: int
    workflow: str
    workflow_version: int
    def __init__(self, name: _Optional[str] = ..., capability: _Optional[str] = ..., action: _Optional[str] = ..., status: _Optional[_Union[TaskStatus, str]] = ..., attempt: _Optional[int] = ..., max_attempts: _Optional[int] = ..., output_json: _Optional[str] = ..., error: _Optional[str] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., progress: _Optional[_Union[TaskProgress, _Mapping]] = ..., spread: bool = ..., width: _Optional[int] = ..., done: _Optional[int] = ..., failed: _Optional[int] = ..., attempts: _Optional[_Iterable[_Union[TaskAttempt, _Mapping]]] = ..., attempts_omitted: _Optional[int] = ..., needs: _Optional[_Iterable[str]] = ..., loop: bool = ..., iterations: _Optional[int] = ..., workflow: _Optional[str] = ..., workflow_version: _Optional[int] = ..., wait_signal: _Optional[str] = ..., waiting: bool = ..., wait_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class UpdateScheduleRequest(_message.Message):
    __slots__ = ["name", "op"]
    class Op(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    OP_PAUSE: UpdateScheduleRequest.Op
    OP_RESUME: UpdateScheduleRequest.Op
    OP_UNSPECIFIED: UpdateScheduleRequest.Op
    name: str
    op: UpdateScheduleRequest.Op
    def __init__(self, name: _Optional[str] = ..., op: _Optional[_Union[UpdateScheduleRequest.Op, str]] = ...) -> None: ...

class UpdateScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: ScheduleInfo
    def __init__(self, schedule: _Optional[_Union[ScheduleInfo, _Mapping]] = ...) -> None: ...

class WagglerRole(_message.Message):
    __slots__ = ["capability", "epoch", "failovers", "in_flight", "live", "node", "note", "queued", "standbys", "state", "workers"]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FAILOVERS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    STANDBYS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    capability: str
    epoch: int
    failovers: int
    in_flight: int
    live: bool
    node: str
    note: str
    queued: int
    standbys: _containers.RepeatedScalarFieldContainer[str]
    state: str
    workers: int
    def __init__(self, capability: _Optional[str] = ..., node: _Optional[str] = ..., epoch: _Optional[int] = ..., state: _Optional[str] = ..., workers: _Optional[int] = ..., in_flight: _Optional[int] = ..., queued: _Optional[int] = ..., standbys: _Optional[_Iterable[str]] = ..., live: bool = ..., note: _Optional[str] = ..., failovers: _Optional[int] = ...) -> None: ...

class WatchInstanceRequest(_message.Message):
    __slots__ = ["after_seq", "instance_id"]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class WatchInstanceResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: Event
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ...) -> None: ...

class WorkflowInfo(_message.Message):
    __slots__ = ["capabilities", "created_at", "description", "ir_hash", "name", "tasks", "version"]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    IR_HASH_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    description: str
    ir_hash: str
    name: str
    tasks: int
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ..., ir_hash: _Optional[str] = ..., description: _Optional[str] = ..., tasks: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., capabilities: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkflowRef(_message.Message):
    __slots__ = ["name", "version"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class InstanceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class TaskStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class KeyringOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class QuarantineOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class LogStream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
