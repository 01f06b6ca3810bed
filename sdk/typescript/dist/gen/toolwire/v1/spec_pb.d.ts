import type { GenEnum, GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Duration } from "@bufbuild/protobuf/wkt";
import type { Icon } from "./content_pb.js";
import type { ErrorType } from "./error_pb.js";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file toolwire/v1/spec.proto.
 */
export declare const file_toolwire_v1_spec: GenFile;
/**
 * ToolSpec describes one version of one tool. Its version is the content
 * hash of every other field, computed by the registry.
 *
 * @generated from message toolwire.v1.ToolSpec
 */
export type ToolSpec = Message<"toolwire.v1.ToolSpec"> & {
    /**
     * Unique name, `^[a-zA-Z0-9_-]{1,64}$` (the function-name rule of the LLM
     * providers). MCP tools are named `mcp__<server>__<tool>`.
     *
     * @generated from field: string name = 1;
     */
    name: string;
    /**
     * Human-readable title.
     *
     * @generated from field: string title = 2;
     */
    title: string;
    /**
     * Full description for the model.
     *
     * @generated from field: string description = 3;
     */
    description: string;
    /**
     * Two to four lines, always shown to models.
     *
     * @generated from field: string summary = 4;
     */
    summary: string;
    /**
     * Long documentation, fetched on demand.
     *
     * @generated from field: string doc = 5;
     */
    doc: string;
    /**
     * Which pool runs the tool.
     *
     * @generated from field: toolwire.v1.ExecutorType executor = 6;
     */
    executor: ExecutorType;
    /**
     * Per-executor configuration. Exactly one is set, matching executor.
     *
     * @generated from oneof toolwire.v1.ToolSpec.config
     */
    config: {
        /**
         * @generated from field: toolwire.v1.NativeConfig native = 7;
         */
        value: NativeConfig;
        case: "native";
    } | {
        /**
         * @generated from field: toolwire.v1.McpConfig mcp = 8;
         */
        value: McpConfig;
        case: "mcp";
    } | {
        /**
         * @generated from field: toolwire.v1.SandboxConfig sandbox = 9;
         */
        value: SandboxConfig;
        case: "sandbox";
    } | {
        /**
         * @generated from field: toolwire.v1.HttpConfig http = 10;
         */
        value: HttpConfig;
        case: "http";
    } | {
        case: undefined;
        value?: undefined;
    };
    /**
     * JSON Schema (draft 2020-12) of the arguments, as JSON text.
     *
     * @generated from field: string input_schema_json = 11;
     */
    inputSchemaJson: string;
    /**
     * JSON Schema (draft 2020-12) of the structured output, as JSON text.
     * Empty means unspecified.
     *
     * @generated from field: string output_schema_json = 12;
     */
    outputSchemaJson: string;
    /**
     * Behaviour hints (MCP's tool annotations).
     *
     * @generated from field: toolwire.v1.ToolAnnotations annotations = 13;
     */
    annotations?: ToolAnnotations | undefined;
    /**
     * @generated from field: toolwire.v1.ToolCategory category = 14;
     */
    category: ToolCategory;
    /**
     * Scopes a caller needs to see and call the tool. Empty = any caller.
     *
     * @generated from field: repeated string scopes = 15;
     */
    scopes: string[];
    /**
     * Intent types the tool may emit: built-in names (END_SESSION, SET_STATE,
     * ...) or namespaced custom types (`acme.reindex`).
     *
     * @generated from field: repeated string intents = 16;
     */
    intents: string[];
    /**
     * @generated from field: toolwire.v1.Timeouts timeouts = 17;
     */
    timeouts?: Timeouts | undefined;
    /**
     * @generated from field: toolwire.v1.RetryPolicy retry = 18;
     */
    retry?: RetryPolicy | undefined;
    /**
     * When true every call needs a signed approval token.
     *
     * @generated from field: bool requires_approval = 19;
     */
    requiresApproval: boolean;
    /**
     * @generated from field: toolwire.v1.Limits limits = 20;
     */
    limits?: Limits | undefined;
    /**
     * Content hash of the spec (`sha256:<hex>`), set by the registry.
     *
     * @generated from field: string version = 21;
     */
    version: string;
    /**
     * Provider token used in subjects: `builtin` or the MCP server name.
     *
     * @generated from field: string provider = 22;
     */
    provider: string;
    /**
     * A disabled tool is listed but not callable; disabled_reason says why.
     *
     * @generated from field: bool disabled = 23;
     */
    disabled: boolean;
    /**
     * @generated from field: string disabled_reason = 24;
     */
    disabledReason: string;
    /**
     * Icons of the tool for user interfaces (MCP's tool `icons`).
     *
     * @generated from field: repeated toolwire.v1.Icon icons = 25;
     */
    icons: Icon[];
    /**
     * The tool's own metadata (MCP's tool `_meta`), as JSON text; empty
     * when it has none.
     *
     * @generated from field: string meta_json = 26;
     */
    metaJson: string;
    /**
     * Whether an MCP client may get the tool's calls as tasks (MCP's
     * `execution.taskSupport`; docs/mcp.md, "Tasks").
     *
     * @generated from field: toolwire.v1.TaskSupport task_support = 27;
     */
    taskSupport: TaskSupport;
    /**
     * How the structured output is checked against output_schema_json: by
     * default a result whose structured output does not match is answered
     * PERMANENT, naming the path (the tool ran: side effects possible);
     * true passes it as it is, with a WARN log and
     * toolwire_output_schema_violations_total{action="passed"}. A result
     * without structured output is not checked.
     *
     * @generated from field: bool output_schema_advisory = 28;
     */
    outputSchemaAdvisory: boolean;
    /**
     * The URI of the tool's widget template (an MCP resource, `ui://...`)
     * that a client rendering widgets shows its results in. The MCP
     * endpoint writes it into the tool's `_meta` for the clients whose
     * rendering profile asks for widget meta (docs/mcp.md, "Client
     * profiles": `openai/outputTemplate` for ChatGPT); tool code never
     * writes a client's keys. Empty = none.
     *
     * @generated from field: string ui_template = 29;
     */
    uiTemplate: string;
    /**
     * The skills a `skill` tool serves (docs/skills.md): what a worker
     * loaded from its skill directories, each with the digest and size of
     * every file. Listed to models by name and description; loaded through
     * the tool, one call per skill or resource. Empty for every other tool.
     * Part of the content hash: a changed skill is a new version.
     *
     * @generated from field: repeated toolwire.v1.Skill skills = 30;
     */
    skills: Skill[];
    /**
     * How the tool is defined for a session, by the model family of the
     * request and the session's mode (docs/toolsets.md, "Definitions in the
     * spec"): the first definition whose model_families and modes both
     * match applies, in every list, export and call of that family and
     * mode; none matching, the tool as above. Chosen when a list or a call
     * needs it, never stored per session. A definition only takes away and
     * narrows (hidden; an input schema a call must satisfy as well as
     * input_schema_json): it grants nothing. At most 16. Part of the
     * content hash.
     *
     * @generated from field: repeated toolwire.v1.ToolDefinition definitions = 31;
     */
    definitions: ToolDefinition[];
};
/**
 * Describes the message toolwire.v1.ToolSpec.
 * Use `create(ToolSpecSchema)` to create a new message.
 */
export declare const ToolSpecSchema: GenMessage<ToolSpec>;
/**
 * ToolDefinition is one way a tool is offered: to the sessions of some
 * model families in some modes.
 *
 * @generated from message toolwire.v1.ToolDefinition
 */
export type ToolDefinition = Message<"toolwire.v1.ToolDefinition"> & {
    /**
     * The model families it is for (the policy's families: `gpt`,
     * `claude`, …); empty = any request, one naming no model too. A listed
     * family matches only a request naming a model of that family.
     *
     * @generated from field: repeated string model_families = 1;
     */
    modelFamilies: string[];
    /**
     * The session modes it is for; empty = any mode and none. A listed mode
     * matches only a session in that mode (after the policy's
     * sessions.default_mode).
     *
     * @generated from field: repeated string modes = 2;
     */
    modes: string[];
    /**
     * Not offered at all: left out of lists, a call refused
     * PERMISSION_DENIED naming the definition.
     *
     * @generated from field: bool hidden = 3;
     */
    hidden: boolean;
    /**
     * What the model reads to choose the tool (replaces summary and
     * description in lists and exports); "" = the tool's own. At most 4096
     * bytes.
     *
     * @generated from field: string description = 4;
     */
    description: string;
    /**
     * An input schema (JSON Schema 2020-12) offered instead of the tool's
     * own and checked as well as it: a narrowing. "" = the tool's own.
     *
     * @generated from field: string input_schema_json = 5;
     */
    inputSchemaJson: string;
};
/**
 * Describes the message toolwire.v1.ToolDefinition.
 * Use `create(ToolDefinitionSchema)` to create a new message.
 */
export declare const ToolDefinitionSchema: GenMessage<ToolDefinition>;
/**
 * Skill is one skill: a directory in the common SKILL.md format (YAML
 * front matter with name and description, then the instructions in
 * Markdown; the directory's other files are its resources).
 *
 * @generated from message toolwire.v1.Skill
 */
export type Skill = Message<"toolwire.v1.Skill"> & {
    /**
     * The skill's name, `^[a-z0-9]+(-[a-z0-9]+)*$`, at most 64 characters;
     * the name of its directory.
     *
     * @generated from field: string name = 1;
     */
    name: string;
    /**
     * What the skill is for and when to use it, from the front matter; at
     * most 1024 characters.
     *
     * @generated from field: string description = 2;
     */
    description: string;
    /**
     * Hex SHA-256 over the paths and digests of its files: a changed file
     * is a new version.
     *
     * @generated from field: string version = 3;
     */
    version: string;
    /**
     * Its files, SKILL.md first, then the resources by path.
     *
     * @generated from field: repeated toolwire.v1.SkillFile files = 4;
     */
    files: SkillFile[];
    /**
     * SKILL.md's whole front matter as a JSON object (its YAML mapping,
     * every key, at most 16 KiB), which MCP's Skills extension lists as the
     * skill's `frontmatter`; name and description equal the fields above.
     * Empty from a worker older than the field: then only name and
     * description are listed.
     *
     * @generated from field: string frontmatter = 5;
     */
    frontmatter: string;
};
/**
 * Describes the message toolwire.v1.Skill.
 * Use `create(SkillSchema)` to create a new message.
 */
export declare const SkillSchema: GenMessage<Skill>;
/**
 * SkillFile is one file of a skill.
 *
 * @generated from message toolwire.v1.SkillFile
 */
export type SkillFile = Message<"toolwire.v1.SkillFile"> & {
    /**
     * Path in the skill's directory, `/`-separated, never `.` or `..`.
     *
     * @generated from field: string path = 1;
     */
    path: string;
    /**
     * Size in bytes.
     *
     * @generated from field: int64 size = 2;
     */
    size: bigint;
    /**
     * Hex SHA-256 of the content.
     *
     * @generated from field: string sha256 = 3;
     */
    sha256: string;
    /**
     * Media type (from the file name's extension; text/markdown for .md).
     *
     * @generated from field: string mime_type = 4;
     */
    mimeType: string;
};
/**
 * Describes the message toolwire.v1.SkillFile.
 * Use `create(SkillFileSchema)` to create a new message.
 */
export declare const SkillFileSchema: GenMessage<SkillFile>;
/**
 * ToolAnnotations are MCP's behaviour hints. Unset means the MCP default:
 * read_only=false, destructive=true, idempotent=false, open_world=true.
 *
 * @generated from message toolwire.v1.ToolAnnotations
 */
export type ToolAnnotations = Message<"toolwire.v1.ToolAnnotations"> & {
    /**
     * @generated from field: optional bool read_only = 1;
     */
    readOnly?: boolean | undefined;
    /**
     * @generated from field: optional bool destructive = 2;
     */
    destructive?: boolean | undefined;
    /**
     * @generated from field: optional bool idempotent = 3;
     */
    idempotent?: boolean | undefined;
    /**
     * @generated from field: optional bool open_world = 4;
     */
    openWorld?: boolean | undefined;
};
/**
 * Describes the message toolwire.v1.ToolAnnotations.
 * Use `create(ToolAnnotationsSchema)` to create a new message.
 */
export declare const ToolAnnotationsSchema: GenMessage<ToolAnnotations>;
/**
 * Timeouts are Temporal's four. Zero inherits the worker default.
 *
 * @generated from message toolwire.v1.Timeouts
 */
export type Timeouts = Message<"toolwire.v1.Timeouts"> & {
    /**
     * Longest wait in the queue; a call not started by then answers EXPIRED.
     *
     * @generated from field: google.protobuf.Duration schedule_to_start = 1;
     */
    scheduleToStart?: Duration | undefined;
    /**
     * Longest single attempt.
     *
     * @generated from field: google.protobuf.Duration start_to_close = 2;
     */
    startToClose?: Duration | undefined;
    /**
     * Longest time from admission to the terminal result, retries included.
     *
     * @generated from field: google.protobuf.Duration schedule_to_close = 3;
     */
    scheduleToClose?: Duration | undefined;
    /**
     * Longest silence of a running execution before it is abandoned.
     *
     * @generated from field: google.protobuf.Duration heartbeat = 4;
     */
    heartbeat?: Duration | undefined;
    /**
     * Soft latency budget: how long a call of the tool should take from its
     * admission to its stored result, retries and queueing included. Never
     * enforced: a call over it still runs and answers, and the dispatcher
     * that admitted it records the overrun (ResponseMeta.
     * latency_budget_exceeded, a LATENCY_BUDGET_EXCEEDED event, a WARN log
     * and toolwire_latency_budget_exceeded_total). The policy document's
     * latency_budgets may add tighter ones (the tightest applies). Zero =
     * none; no worker default. The hard bounds are start_to_close and
     * schedule_to_close.
     *
     * @generated from field: google.protobuf.Duration latency_budget = 5;
     */
    latencyBudget?: Duration | undefined;
};
/**
 * Describes the message toolwire.v1.Timeouts.
 * Use `create(TimeoutsSchema)` to create a new message.
 */
export declare const TimeoutsSchema: GenMessage<Timeouts>;
/**
 * RetryPolicy bounds in-process retries of retryable errors. Zero values
 * inherit the worker defaults.
 *
 * @generated from message toolwire.v1.RetryPolicy
 */
export type RetryPolicy = Message<"toolwire.v1.RetryPolicy"> & {
    /**
     * Attempts in all, the first included. 1 = never retry.
     *
     * @generated from field: int32 max_attempts = 1;
     */
    maxAttempts: number;
    /**
     * @generated from field: google.protobuf.Duration initial_interval = 2;
     */
    initialInterval?: Duration | undefined;
    /**
     * @generated from field: google.protobuf.Duration max_interval = 3;
     */
    maxInterval?: Duration | undefined;
    /**
     * @generated from field: double multiplier = 4;
     */
    multiplier: number;
    /**
     * Randomisation factor in [0, 1].
     *
     * @generated from field: double jitter = 5;
     */
    jitter: number;
    /**
     * Error types never retried, whatever the error says.
     *
     * @generated from field: repeated toolwire.v1.ErrorType non_retryable = 6;
     */
    nonRetryable: ErrorType[];
};
/**
 * Describes the message toolwire.v1.RetryPolicy.
 * Use `create(RetryPolicySchema)` to create a new message.
 */
export declare const RetryPolicySchema: GenMessage<RetryPolicy>;
/**
 * Limits bound the size of arguments and outputs. Zero inherits the defaults.
 *
 * @generated from message toolwire.v1.Limits
 */
export type Limits = Message<"toolwire.v1.Limits"> & {
    /**
     * @generated from field: int64 max_args_bytes = 1;
     */
    maxArgsBytes: bigint;
    /**
     * @generated from field: int32 max_args_depth = 2;
     */
    maxArgsDepth: number;
    /**
     * Inline output limits, on the output's text (its text blocks joined by
     * newlines, the truncation marker included): a longer output is cut to
     * them, keeping the head or the tail (truncate), and the whole output
     * goes to the blob store (ResponseMeta.full_output, full_text), read
     * back with DispatcherService.GetOutput. Structured output longer than
     * max_output_bytes is left out of the inline response. Zero = no limit
     * but the worker's inline limit on the encoded response (768 KiB).
     *
     * @generated from field: int64 max_output_bytes = 3;
     */
    maxOutputBytes: bigint;
    /**
     * @generated from field: int32 max_output_lines = 4;
     */
    maxOutputLines: number;
    /**
     * @generated from field: toolwire.v1.TruncateDirection truncate = 5;
     */
    truncate: TruncateDirection;
};
/**
 * Describes the message toolwire.v1.Limits.
 * Use `create(LimitsSchema)` to create a new message.
 */
export declare const LimitsSchema: GenMessage<Limits>;
/**
 * NativeConfig configures a native Go tool.
 *
 * @generated from message toolwire.v1.NativeConfig
 */
export type NativeConfig = Message<"toolwire.v1.NativeConfig"> & {
    /**
     * Name of the registered Go function; empty = the tool name.
     *
     * @generated from field: string function = 1;
     */
    function: string;
};
/**
 * Describes the message toolwire.v1.NativeConfig.
 * Use `create(NativeConfigSchema)` to create a new message.
 */
export declare const NativeConfigSchema: GenMessage<NativeConfig>;
/**
 * McpConfig configures a tool imported from an MCP server.
 *
 * @generated from message toolwire.v1.McpConfig
 */
export type McpConfig = Message<"toolwire.v1.McpConfig"> & {
    /**
     * Server name from the worker configuration.
     *
     * @generated from field: string server = 1;
     */
    server: string;
    /**
     * Tool name on that server.
     *
     * @generated from field: string tool = 2;
     */
    tool: string;
    /**
     * Hash of the server's tool definition when it was approved.
     *
     * @generated from field: string definition_hash = 3;
     */
    definitionHash: string;
    /**
     * The server's `execution.taskSupport` for the tool, as it wrote it:
     * "forbidden", "optional" or "required"; empty when it said nothing
     * (which means "forbidden"). toolwire calls tools without task
     * augmentation, so a tool that requires it is disabled.
     *
     * @generated from field: string task_support = 4;
     */
    taskSupport: string;
};
/**
 * Describes the message toolwire.v1.McpConfig.
 * Use `create(McpConfigSchema)` to create a new message.
 */
export declare const McpConfigSchema: GenMessage<McpConfig>;
/**
 * SandboxConfig configures a process run inside a sandbox.
 *
 * @generated from message toolwire.v1.SandboxConfig
 */
export type SandboxConfig = Message<"toolwire.v1.SandboxConfig"> & {
    /**
     * argv template; each `{arg}` becomes exactly one argv element.
     *
     * @generated from field: repeated string argv = 1;
     */
    argv: string[];
    /**
     * Argument whose value is written to stdin; empty = no stdin.
     *
     * @generated from field: string stdin_arg = 2;
     */
    stdinArg: string;
    /**
     * Names of environment variables passed through from the worker.
     *
     * @generated from field: repeated string env_allow = 3;
     */
    envAllow: string[];
    /**
     * @generated from field: toolwire.v1.SandboxLimits limits = 4;
     */
    limits?: SandboxLimits | undefined;
    /**
     * Network access; off by default.
     *
     * @generated from field: bool network = 5;
     */
    network: boolean;
    /**
     * @generated from field: repeated string read_only_paths = 6;
     */
    readOnlyPaths: string[];
    /**
     * @generated from field: repeated string writable_paths = 7;
     */
    writablePaths: string[];
    /**
     * Exit codes mapped to error types; unmapped non-zero codes are PERMANENT.
     *
     * @generated from field: map<int32, toolwire.v1.ErrorType> exit_codes = 8;
     */
    exitCodes: {
        [key: number]: ErrorType;
    };
    /**
     * Arguments whose values may start with "-" (otherwise such values are
     * refused, so an argument cannot become an option).
     *
     * @generated from field: repeated string option_args = 9;
     */
    optionArgs: string[];
    /**
     * Stdout is JSON: it becomes the structured output (and a text block).
     *
     * @generated from field: bool json_output = 10;
     */
    jsonOutput: boolean;
    /**
     * JSON field of the stdout object that carries intents (json_output).
     *
     * @generated from field: string intents_field = 11;
     */
    intentsField: string;
    /**
     * Fixed environment variables set for the process.
     *
     * @generated from field: map<string, string> env = 12;
     */
    env: {
        [key: string]: string;
    };
};
/**
 * Describes the message toolwire.v1.SandboxConfig.
 * Use `create(SandboxConfigSchema)` to create a new message.
 */
export declare const SandboxConfigSchema: GenMessage<SandboxConfig>;
/**
 * SandboxLimits bound a sandboxed process. Zero inherits the defaults.
 *
 * @generated from message toolwire.v1.SandboxLimits
 */
export type SandboxLimits = Message<"toolwire.v1.SandboxLimits"> & {
    /**
     * @generated from field: google.protobuf.Duration wall_time = 1;
     */
    wallTime?: Duration | undefined;
    /**
     * @generated from field: int64 cpu_seconds = 2;
     */
    cpuSeconds: bigint;
    /**
     * @generated from field: int64 memory_bytes = 3;
     */
    memoryBytes: bigint;
    /**
     * @generated from field: int64 processes = 4;
     */
    processes: bigint;
    /**
     * @generated from field: int64 open_files = 5;
     */
    openFiles: bigint;
    /**
     * @generated from field: int64 output_bytes = 6;
     */
    outputBytes: bigint;
};
/**
 * Describes the message toolwire.v1.SandboxLimits.
 * Use `create(SandboxLimitsSchema)` to create a new message.
 */
export declare const SandboxLimitsSchema: GenMessage<SandboxLimits>;
/**
 * HttpConfig configures a call to an HTTP endpoint.
 *
 * @generated from message toolwire.v1.HttpConfig
 */
export type HttpConfig = Message<"toolwire.v1.HttpConfig"> & {
    /**
     * @generated from field: string method = 1;
     */
    method: string;
    /**
     * RFC 6570 simple expansion only.
     *
     * @generated from field: string url_template = 2;
     */
    urlTemplate: string;
    /**
     * @generated from field: string body_template = 3;
     */
    bodyTemplate: string;
    /**
     * @generated from field: map<string, string> headers = 4;
     */
    headers: {
        [key: string]: string;
    };
    /**
     * Header name -> secret reference (`env:NAME` or `file:/path`), resolved
     * by the worker, never taken from arguments.
     *
     * @generated from field: map<string, string> secret_headers = 5;
     */
    secretHeaders: {
        [key: string]: string;
    };
    /**
     * @generated from field: int64 max_response_bytes = 6;
     */
    maxResponseBytes: bigint;
    /**
     * Hosts allowed past the SSRF guard (private addresses are blocked).
     *
     * @generated from field: repeated string allow_hosts = 7;
     */
    allowHosts: string[];
    /**
     * JSON field of the response body that carries intents.
     *
     * @generated from field: string intents_field = 8;
     */
    intentsField: string;
    /**
     * Arguments sent as query parameters.
     *
     * @generated from field: repeated string query_args = 9;
     */
    queryArgs: string[];
    /**
     * Ports allowed; empty = 80 and 443.
     *
     * @generated from field: repeated int32 allow_ports = 10;
     */
    allowPorts: number[];
    /**
     * Networks (CIDR) allowed past the SSRF guard although private,
     * loopback or link-local.
     *
     * @generated from field: repeated string allow_networks = 11;
     */
    allowNetworks: string[];
    /**
     * Response header that carries intents as a JSON array.
     *
     * @generated from field: string intents_header = 12;
     */
    intentsHeader: string;
};
/**
 * Describes the message toolwire.v1.HttpConfig.
 * Use `create(HttpConfigSchema)` to create a new message.
 */
export declare const HttpConfigSchema: GenMessage<HttpConfig>;
/**
 * ExecutorType names the kind of worker pool that runs a tool. It is the
 * first token after `call` in a call subject, so a pool filters on it.
 *
 * @generated from enum toolwire.v1.ExecutorType
 */
export declare enum ExecutorType {
    /**
     * @generated from enum value: EXECUTOR_TYPE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * A typed Go function compiled into a worker binary.
     *
     * @generated from enum value: EXECUTOR_TYPE_NATIVE = 1;
     */
    NATIVE = 1,
    /**
     * A tool of an MCP server (stdio or streamable HTTP).
     *
     * @generated from enum value: EXECUTOR_TYPE_MCP = 2;
     */
    MCP = 2,
    /**
     * A process started from an argv template inside a sandbox.
     *
     * @generated from enum value: EXECUTOR_TYPE_SANDBOX = 3;
     */
    SANDBOX = 3,
    /**
     * An HTTP endpoint described by method, URL and body templates.
     *
     * @generated from enum value: EXECUTOR_TYPE_HTTP = 4;
     */
    HTTP = 4
}
/**
 * Describes the enum toolwire.v1.ExecutorType.
 */
export declare const ExecutorTypeSchema: GenEnum<ExecutorType>;
/**
 * ToolCategory is a coarse classification shown to models and operators.
 *
 * @generated from enum toolwire.v1.ToolCategory
 */
export declare enum ToolCategory {
    /**
     * @generated from enum value: TOOL_CATEGORY_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * @generated from enum value: TOOL_CATEGORY_RETRIEVAL = 1;
     */
    RETRIEVAL = 1,
    /**
     * @generated from enum value: TOOL_CATEGORY_ACTION = 2;
     */
    ACTION = 2,
    /**
     * @generated from enum value: TOOL_CATEGORY_UTILITY = 3;
     */
    UTILITY = 3
}
/**
 * Describes the enum toolwire.v1.ToolCategory.
 */
export declare const ToolCategorySchema: GenEnum<ToolCategory>;
/**
 * TruncateDirection says which part of an oversized output is kept inline.
 *
 * @generated from enum toolwire.v1.TruncateDirection
 */
export declare enum TruncateDirection {
    /**
     * Defaults to HEAD.
     *
     * @generated from enum value: TRUNCATE_DIRECTION_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Keep the beginning of the output.
     *
     * @generated from enum value: TRUNCATE_DIRECTION_HEAD = 1;
     */
    HEAD = 1,
    /**
     * Keep the end of the output (logs, test runs).
     *
     * @generated from enum value: TRUNCATE_DIRECTION_TAIL = 2;
     */
    TAIL = 2
}
/**
 * Describes the enum toolwire.v1.TruncateDirection.
 */
export declare const TruncateDirectionSchema: GenEnum<TruncateDirection>;
/**
 * TaskSupport says whether the MCP endpoint may answer a call of the tool
 * as a task (the Tasks extension) rather than keep the request open.
 *
 * @generated from enum toolwire.v1.TaskSupport
 */
export declare enum TaskSupport {
    /**
     * As TASK_SUPPORT_OPTIONAL.
     *
     * @generated from enum value: TASK_SUPPORT_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Never a task: the request stays open until the result.
     *
     * @generated from enum value: TASK_SUPPORT_FORBIDDEN = 1;
     */
    FORBIDDEN = 1,
    /**
     * A task when the client declared the extension and the call outlives
     * the endpoint's threshold.
     *
     * @generated from enum value: TASK_SUPPORT_OPTIONAL = 2;
     */
    OPTIONAL = 2,
    /**
     * Only for clients that declared the extension; others are refused.
     *
     * @generated from enum value: TASK_SUPPORT_REQUIRED = 3;
     */
    REQUIRED = 3
}
/**
 * Describes the enum toolwire.v1.TaskSupport.
 */
export declare const TaskSupportSchema: GenEnum<TaskSupport>;
