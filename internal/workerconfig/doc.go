// Package workerconfig builds a worker from its YAML configuration
// (worker --config FILE, the dispatcher's --worker-config): the pools it
// serves, the spec files of its sandbox and HTTP tools with the values of
// their ${NAME} placeholders, its MCP servers, and the settings of the
// sandbox, HTTP and MCP executors. pkg/toolworker (the worker binary and
// custom workers) and the dispatcher's in-process workers are built here.
// NewWorker is the internal constructor of a worker on an open bus (the
// dispatcher process, tests, benchmarks): pkg/toolworker's public API
// names no internal type, so it offers only Main, MainArgs, Run and
// Options.
//
// # The file
//
// Every section is optional; unknown fields are errors. A worker serves
// each executor type with at most one pool. Pool settings come from the
// file's pool, then from the command line (Options): concurrency 64
// (native, http, mcp) or twice the number of CPUs (sandbox), AckWait 30s
// and MaxDeliver 5 when neither sets them. The pools served are the
// --pools flag's, else the file's, else one of every type with something
// to serve: native when the binary has native tools, the types of the
// spec files' tools, mcp when servers are listed (native when nothing is).
// The binary's native tools (Options.Tools: the built-in echo, fail,
// remember and sleep of the worker binary) are published only when a
// native pool is served: `worker --pools http` registers its HTTP tools
// alone, never native tools that nothing would run. A spec-file tool and a
// native tool of one name in one worker are refused (worker.Worker.Start),
// and a name another pool defines is refused at start-up naming both
// (registry.Claim).
//
// Skills (`skills:`, directories of skill directories in the SKILL.md
// format, relative to the configuration file) are loaded by
// internal/skills at build time, bounded and confined to their
// directories, and served by one native tool, `skill`, added to the
// binary's native tools: it is published only with a native pool, as
// they are, so `skills:` without a native pool is an error (Validate when
// the file's pools have none; NewWorker when the pools served, narrowed
// by flags or not, have none, BestEffort or not: configured skills are
// never silently left unserved), and a skill that breaks a rule stops the
// worker from being built, naming the file (docs/skills.md).
//
// Spec files and directories (*.yaml, *.yml, *.json; see internal/specfile)
// are relative to the configuration file. A tool declared twice, or a tool
// whose type no pool of this worker serves, is an error — except in the
// dispatcher's built-in default configuration (Options.BestEffort) with
// its pools narrowed (--workers: Options.PoolTypes): then the other
// types' tools are another worker's, left unpublished with an INFO log,
// as the native tools are; an operator's own file stays an error (before,
// `dispatcher --workers native` refused to start with the default
// configuration: "tool toolwire_catalog is a http tool, but no http pool
// is served"); executors that
// can check more do (the HTTP executor its allowlists and SSRF guard
// against the URL template). ${NAME} takes its value from Options.Vars,
// then the file's vars (which win), and otherwise only from environment
// variables named TOOLWIRE_VAR_*: specs are published to the registry for
// every caller to read, so no other variable is one typo away from being
// published. Secrets belong in secret_headers, resolved per call.
// Importing the package registers the sandbox and HTTP spec checks with
// internal/specfile.
//
// # Executors
//
// Each type served gets one executor. An executor that cannot start (an
// mcp pool without servers, say) stops the worker from being built, unless
// Options.BestEffort (the dispatcher's default configuration): then it is
// logged and its calls are answered PERMANENT "not available"
// (Unavailable), never left queued. Worker.Stop stops the worker, then
// closes the executors that are an executors.Closer (MCP sessions and
// server processes, sandboxes, HTTP connections) in reverse order.
//
// The dispatcher's default configuration (its in-process workers without
// --worker-config) is internal/dispatchd's, which embeds its example spec
// files and passes them as Options.SpecDirs.
package workerconfig
