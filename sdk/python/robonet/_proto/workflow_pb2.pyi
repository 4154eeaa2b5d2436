from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
FAILURE_POLICY_ABORT: FailurePolicy
FAILURE_POLICY_RETRY: FailurePolicy
FAILURE_POLICY_SKIP: FailurePolicy
FAILURE_POLICY_UNSPECIFIED: FailurePolicy
TASK_ON_EVERY_NODE: TaskOn
TASK_ON_UNSPECIFIED: TaskOn
VALUE_TYPE_ANY: ValueType
VALUE_TYPE_BOOL: ValueType
VALUE_TYPE_INT: ValueType
VALUE_TYPE_LIST: ValueType
VALUE_TYPE_MAP: ValueType
VALUE_TYPE_NUMBER: ValueType
VALUE_TYPE_STRING: ValueType
VALUE_TYPE_UNSPECIFIED: ValueType

class ChildWorkflow(_message.Message):
    __slots__ = ["name", "version"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class Expr(_message.Message):
    __slots__ = ["source"]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    source: str
    def __init__(self, source: _Optional[str] = ...) -> None: ...

class Input(_message.Message):
    __slots__ = ["default_json", "description", "name", "required", "type"]
    DEFAULT_JSON_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    default_json: bytes
    description: str
    name: str
    required: bool
    type: ValueType
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[ValueType, str]] = ..., required: bool = ..., default_json: _Optional[bytes] = ..., description: _Optional[str] = ...) -> None: ...

class Interpolation(_message.Message):
    __slots__ = ["parts"]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    parts: _containers.RepeatedCompositeFieldContainer[InterpolationPart]
    def __init__(self, parts: _Optional[_Iterable[_Union[InterpolationPart, _Mapping]]] = ...) -> None: ...

class InterpolationPart(_message.Message):
    __slots__ = ["expr", "text"]
    EXPR_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    expr: Expr
    text: str
    def __init__(self, text: _Optional[str] = ..., expr: _Optional[_Union[Expr, _Mapping]] = ...) -> None: ...

class Join(_message.Message):
    __slots__ = ["cancel_rest", "min"]
    CANCEL_REST_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    cancel_rest: bool
    min: int
    def __init__(self, min: _Optional[int] = ..., cancel_rest: bool = ...) -> None: ...

class Loop(_message.Message):
    __slots__ = ["every", "max", "over", "until"]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    OVER_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    every: _duration_pb2.Duration
    max: int
    over: Expr
    until: Expr
    def __init__(self, until: _Optional[_Union[Expr, _Mapping]] = ..., over: _Optional[_Union[Expr, _Mapping]] = ..., max: _Optional[int] = ..., every: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Output(_message.Message):
    __slots__ = ["name", "value"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: Template
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[Template, _Mapping]] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ["factor", "initial", "jitter", "max", "max_attempts"]
    FACTOR_FIELD_NUMBER: _ClassVar[int]
    INITIAL_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    factor: float
    initial: _duration_pb2.Duration
    jitter: float
    max: _duration_pb2.Duration
    max_attempts: int
    def __init__(self, max_attempts: _Optional[int] = ..., initial: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., factor: _Optional[float] = ..., max: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., jitter: _Optional[float] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ["accept", "accept_text", "action", "capability", "description", "join", "loop", "name", "needs", "on", "on_failure", "retry", "spread", "timeout", "verify", "wait", "when", "workflow"]
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_TEXT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    JOIN_FIELD_NUMBER: _ClassVar[int]
    LOOP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEEDS_FIELD_NUMBER: _ClassVar[int]
    ON_FAILURE_FIELD_NUMBER: _ClassVar[int]
    ON_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    WHEN_FIELD_NUMBER: _ClassVar[int]
    WITH_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    accept: Expr
    accept_text: str
    action: str
    capability: str
    description: str
    join: Join
    loop: Loop
    name: str
    needs: _containers.RepeatedScalarFieldContainer[str]
    on: TaskOn
    on_failure: FailurePolicy
    retry: RetryPolicy
    spread: Expr
    timeout: _duration_pb2.Duration
    verify: int
    wait: Wait
    when: Expr
    workflow: ChildWorkflow
    def __init__(self, name: _Optional[str] = ..., capability: _Optional[str] = ..., action: _Optional[str] = ..., needs: _Optional[_Iterable[str]] = ..., spread: _Optional[_Union[Expr, _Mapping]] = ..., when: _Optional[_Union[Expr, _Mapping]] = ..., on_failure: _Optional[_Union[FailurePolicy, str]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., description: _Optional[str] = ..., verify: _Optional[int] = ..., accept: _Optional[_Union[Expr, _Mapping]] = ..., accept_text: _Optional[str] = ..., join: _Optional[_Union[Join, _Mapping]] = ..., loop: _Optional[_Union[Loop, _Mapping]] = ..., on: _Optional[_Union[TaskOn, str]] = ..., workflow: _Optional[_Union[ChildWorkflow, _Mapping]] = ..., wait: _Optional[_Union[Wait, _Mapping]] = ..., **kwargs) -> None: ...

class Template(_message.Message):
    __slots__ = ["expr", "interpolation", "list", "literal_json", "map"]
    EXPR_FIELD_NUMBER: _ClassVar[int]
    INTERPOLATION_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    LITERAL_JSON_FIELD_NUMBER: _ClassVar[int]
    MAP_FIELD_NUMBER: _ClassVar[int]
    expr: Expr
    interpolation: Interpolation
    list: TemplateList
    literal_json: bytes
    map: TemplateMap
    def __init__(self, literal_json: _Optional[bytes] = ..., expr: _Optional[_Union[Expr, _Mapping]] = ..., interpolation: _Optional[_Union[Interpolation, _Mapping]] = ..., list: _Optional[_Union[TemplateList, _Mapping]] = ..., map: _Optional[_Union[TemplateMap, _Mapping]] = ...) -> None: ...

class TemplateEntry(_message.Message):
    __slots__ = ["key", "value"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: Template
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Template, _Mapping]] = ...) -> None: ...

class TemplateList(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Template]
    def __init__(self, items: _Optional[_Iterable[_Union[Template, _Mapping]]] = ...) -> None: ...

class TemplateMap(_message.Message):
    __slots__ = ["entries"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[TemplateEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[TemplateEntry, _Mapping]]] = ...) -> None: ...

class Trigger(_message.Message):
    __slots__ = ["events"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, events: _Optional[_Iterable[str]] = ...) -> None: ...

class Wait(_message.Message):
    __slots__ = ["duration", "signal", "timeout", "until", "until_text"]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    UNTIL_TEXT_FIELD_NUMBER: _ClassVar[int]
    duration: _duration_pb2.Duration
    signal: str
    timeout: _duration_pb2.Duration
    until: Expr
    until_text: str
    def __init__(self, signal: _Optional[str] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., until: _Optional[_Union[Expr, _Mapping]] = ..., until_text: _Optional[str] = ...) -> None: ...

class Workflow(_message.Message):
    __slots__ = ["description", "inputs", "name", "outputs", "tasks", "trigger", "version"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    description: str
    inputs: _containers.RepeatedCompositeFieldContainer[Input]
    name: str
    outputs: _containers.RepeatedCompositeFieldContainer[Output]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    trigger: Trigger
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ..., description: _Optional[str] = ..., inputs: _Optional[_Iterable[_Union[Input, _Mapping]]] = ..., tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[Output, _Mapping]]] = ..., trigger: _Optional[_Union[Trigger, _Mapping]] = ...) -> None: ...

class ValueType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class FailurePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class TaskOn(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
