"""Every shape that crosses a process or file boundary in ToolCanary, versioned.

Importing this package pulls in the standard library and pydantic v2, nothing else, so every image and
environment can depend on it. Bump `CONTRACT_VERSION` whenever a shape changes incompatibly; every service
reports it and every manifest records it. `volumes.VOLUME_FILES` names the type of every file a run writes
under the volume roots. Helpers that are not shapes (the launchers' loopback polling, a checkout's git files)
live in `toolcanary.common`.

    from toolcanary.contract import SimulatedTask, parse_assistant_text, compute_aggregates
"""

from toolcanary.contract.append_only import append_text, lock_path, read_lines, rewrite_lines
from toolcanary.contract.bfcl import (
    AGGREGATE_NAMES,
    AGGREGATES,
    BY_NAME,
    CATEGORIES,
    OFFLINE_CATEGORIES,
    Aggregate,
    Category,
    aggregate_value,
    compute_aggregates,
)
from toolcanary.contract.chat import (
    AssistantMessage,
    FunctionCall,
    FunctionSpec,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from toolcanary.contract.csv_schemas import (
    ABORT_COLUMNS,
    BFCL_BY_CATEGORY,
    BFCL_COLUMNS,
    BFCL_WRITTEN_COLUMNS,
    TRAIN_METRICS,
    TRAIN_METRICS_COLUMNS,
    BfclRow,
    append_bfcl_rows,
    read_bfcl_by_category,
    read_train_metrics,
)
from toolcanary.contract.errors import BusyError, ContractError, UsageError
from toolcanary.contract.hermes import (
    MalformedCall,
    ParsedTurn,
    parse_assistant_text,
    render_assistant_turn,
    render_tool_calls,
)
from toolcanary.contract.manifests import CheckpointManifest, EvalPassManifest, read_checkpoint_manifest
from toolcanary.contract.run_id import RUN_ID_RULE, RunId, check_run_id
from toolcanary.contract.simulator_api import (
    ABORT_CAUSES,
    LIBRARIES_FILE,
    ROLES,
    GoldRequest,
    GoldResponse,
    Health,
    LibraryRecord,
    Outcome,
    RoleRecord,
    TaskRequest,
    TaskResponse,
    ToolRequest,
    ToolResponse,
    UserRequest,
    UserResponse,
    VerifyRequest,
    VerifyResponse,
)
from toolcanary.contract.tasks import (
    DifficultySettings,
    ExpectedCall,
    LeftOutEntry,
    LibraryTool,
    SimulatedTask,
    ToolLibrary,
    load_tool_library,
)

# 1.1: train_metrics.csv gained the aborted_<cause> columns and Health its probe and checks; the trainer
# refuses a simulator of another version before step 1.
# 1.2: role rewards are numbers in [-1, 1] (the trustee mode keeps TRUSTEE's fractional scores); the simulator
# records the library it draws from in libraries.jsonl.
# 1.3: POST /v1/gold gives the ideal conversation for a task (the trainer's warm start asks it over HTTP).
# 1.4: tool, user, verify and gold requests carry the `task_key` of an authored task instead of the task.
# 1.5: bfcl_by_category.csv gained `correct_unparsed` and outcomes.jsonl each item's `answer` kind; files
# without them still read, as "not measured". Health gained the simulator's `mode` (required) and, in mode
# trustee, its checkout's `trustee_commit`; the trainer refuses a simulator of another mode or commit.
# 1.6: a call's arguments are any JSON value (the trustee mode passes on what TRUSTEE would); a task carries
# the trustee author's expected calls as written; an episode record counts the tasks it replaced.
# 1.7: a task request may name the `draw` the scripted author seeds the task from (else its key), so a run's
# private keys can name tasks that are the same in every run; checkpoint manifests name a valid run id.
# 1.8: an episode record counts the calls its task's author listed as expected (`expected_calls`); a task
# request's `draw` names GRPO tasks too, and the simulator can replay another run's tasks by draw.
# 1.9: train_metrics.csv gained what the policy update did: pg_loss, pg_clipfrac, grad_norm and
# advantage_abs_mean (files without them still read, as "not measured"); role records are written validated.
# 1.10: bfcl_by_category.csv gained truncated, truncated_bfcl_correct, overlong, overlong_bfcl_correct and
# correct_empty_reasoning (files without them still read, as "not measured"); a pass manifest records the
# thinking mode the server applied (`served_enable_thinking`); train_metrics.csv gained the training-side
# canary, tool_call_share_shift and tool_call_canary (files without them still read, as "not measured").
CONTRACT_VERSION = "1.10"

__all__ = [
    "RUN_ID_RULE",
    "RunId",
    "check_run_id",
    "ABORT_CAUSES",
    "ABORT_COLUMNS",
    "append_text",
    "lock_path",
    "read_lines",
    "rewrite_lines",
    "read_checkpoint_manifest",
    "EvalPassManifest",
    "CheckpointManifest",
    "BusyError",
    "ContractError",
    "UsageError",
    "AGGREGATES",
    "AGGREGATE_NAMES",
    "Aggregate",
    "AssistantMessage",
    "BFCL_BY_CATEGORY",
    "BFCL_COLUMNS",
    "BFCL_WRITTEN_COLUMNS",
    "BY_NAME",
    "BfclRow",
    "CATEGORIES",
    "CONTRACT_VERSION",
    "Category",
    "DifficultySettings",
    "ExpectedCall",
    "FunctionCall",
    "FunctionSpec",
    "GoldRequest",
    "GoldResponse",
    "Health",
    "LeftOutEntry",
    "LibraryTool",
    "MalformedCall",
    "Message",
    "OFFLINE_CATEGORIES",
    "LIBRARIES_FILE",
    "LibraryRecord",
    "Outcome",
    "ParsedTurn",
    "ROLES",
    "RoleRecord",
    "SimulatedTask",
    "SystemMessage",
    "TRAIN_METRICS",
    "TRAIN_METRICS_COLUMNS",
    "TaskRequest",
    "TaskResponse",
    "ToolCall",
    "ToolLibrary",
    "ToolMessage",
    "ToolRequest",
    "ToolResponse",
    "ToolSchema",
    "UserMessage",
    "UserRequest",
    "UserResponse",
    "VerifyRequest",
    "VerifyResponse",
    "aggregate_value",
    "append_bfcl_rows",
    "compute_aggregates",
    "load_tool_library",
    "parse_assistant_text",
    "read_bfcl_by_category",
    "read_train_metrics",
    "render_assistant_turn",
    "render_tool_calls",
]
