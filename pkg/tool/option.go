package tool

import (
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Option sets one part of a tool's spec in New. Options never change the
// name, executor type or schemas, which New derives. A later option
// overrides an earlier one that sets the same field.
type Option func(*toolwirev1.ToolSpec)

// WithTitle sets the human-readable title.
func WithTitle(title string) Option {
	return func(s *toolwirev1.ToolSpec) { s.Title = title }
}

// WithDescription sets the full description shown to models.
func WithDescription(description string) Option {
	return func(s *toolwirev1.ToolSpec) { s.Description = description }
}

// WithSummary sets the summary: two to four lines, always shown to models.
func WithSummary(summary string) Option {
	return func(s *toolwirev1.ToolSpec) { s.Summary = summary }
}

// WithDoc sets the long documentation, fetched on demand.
func WithDoc(doc string) Option {
	return func(s *toolwirev1.ToolSpec) { s.Doc = doc }
}

// WithCategory sets the category (retrieval, action, utility). Default:
// unspecified.
func WithCategory(c toolwirev1.ToolCategory) Option {
	return func(s *toolwirev1.ToolSpec) { s.Category = c }
}

// ReadOnly marks the tool as not modifying its environment (MCP's
// readOnlyHint). Read-only tools may be retried after any retryable error.
func ReadOnly() Option {
	return func(s *toolwirev1.ToolSpec) { annotations(s).ReadOnly = proto.Bool(true) }
}

// Idempotent marks the tool as safe to call repeatedly with the same
// arguments (MCP's idempotentHint).
func Idempotent() Option {
	return func(s *toolwirev1.ToolSpec) { annotations(s).Idempotent = proto.Bool(true) }
}

// Destructive says whether the tool may destroy data (MCP's
// destructiveHint). Unset means true, MCP's default; it is meaningful only
// for tools that are not read-only.
func Destructive(destructive bool) Option {
	return func(s *toolwirev1.ToolSpec) { annotations(s).Destructive = proto.Bool(destructive) }
}

// OpenWorld says whether the tool reaches outside systems (MCP's
// openWorldHint). Unset means true, MCP's default.
func OpenWorld(openWorld bool) Option {
	return func(s *toolwirev1.ToolSpec) { annotations(s).OpenWorld = proto.Bool(openWorld) }
}

// WithTimeouts sets Temporal's four timeouts, the hard bounds of a call.
// Zero inherits the worker's default; a negative value makes New fail. It
// keeps the soft budget WithLatencyBudget set.
func WithTimeouts(scheduleToStart, startToClose, scheduleToClose, heartbeat time.Duration) Option {
	return func(s *toolwirev1.ToolSpec) {
		s.Timeouts = &toolwirev1.Timeouts{
			ScheduleToStart: duration(scheduleToStart),
			StartToClose:    duration(startToClose),
			ScheduleToClose: duration(scheduleToClose),
			Heartbeat:       duration(heartbeat),
			LatencyBudget:   s.GetTimeouts().GetLatencyBudget(),
		}
	}
}

// WithLatencyBudget sets the tool's soft latency budget
// (timeouts.latency_budget): how long a call should take from its
// admission to its stored result, queueing and retries included. A call
// over it is never failed: the dispatcher records the overrun in the
// response's meta (latency_budget_exceeded), on the call's timeline, in
// its log (WARN) and in toolwire_latency_budget_exceeded_total. The
// policy's latency_budgets may hold the tool to a tighter one. Zero = none;
// a negative value makes New fail. The hard bounds are WithTimeouts'.
func WithLatencyBudget(d time.Duration) Option {
	return func(s *toolwirev1.ToolSpec) {
		if s.Timeouts == nil {
			s.Timeouts = &toolwirev1.Timeouts{}
		}
		s.Timeouts.LatencyBudget = duration(d)
	}
}

// WithRetryPolicy sets the retry policy; New stores a copy. Zero fields
// inherit the worker's defaults; see toolwirev1.RetryPolicy.
func WithRetryPolicy(p *toolwirev1.RetryPolicy) Option {
	return func(s *toolwirev1.ToolSpec) { s.Retry = proto.CloneOf(p) }
}

// WithScopes sets the scopes a caller needs to see and call the tool.
// None means any caller.
func WithScopes(scopes ...string) Option {
	return func(s *toolwirev1.ToolSpec) { s.Scopes = append([]string(nil), scopes...) }
}

// WithIntents declares the intent types the tool may emit (see
// EmitIntent): built-in names such as SET_STATE or namespaced custom types
// such as acme.reindex. A tool may emit only the types its spec declares;
// the worker checks them after the call.
func WithIntents(types ...string) Option {
	return func(s *toolwirev1.ToolSpec) { s.Intents = append([]string(nil), types...) }
}

// WithLimits sets the argument and output size limits; New stores a copy.
// Zero fields inherit the defaults.
func WithLimits(l *toolwirev1.Limits) Option {
	return func(s *toolwirev1.ToolSpec) { s.Limits = proto.CloneOf(l) }
}

// RequiresApproval makes every call need an approval that covers it. The
// approval flow does not exist yet, so no approval is accepted: every call
// of such a tool is refused with CONFIRMATION_REQUIRED, at admission and
// again by the worker (it fails closed).
func RequiresApproval() Option {
	return func(s *toolwirev1.ToolSpec) { s.RequiresApproval = true }
}

func annotations(s *toolwirev1.ToolSpec) *toolwirev1.ToolAnnotations {
	if s.Annotations == nil {
		s.Annotations = &toolwirev1.ToolAnnotations{}
	}
	return s.Annotations
}

// duration returns nil for zero, which inherits the default on the wire.
func duration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// WithTaskSupport says whether an MCP client may get the tool's calls as
// tasks (docs/mcp.md, "Tasks"): TASK_SUPPORT_FORBIDDEN keeps every request
// open until the result, TASK_SUPPORT_REQUIRED refuses clients that cannot
// poll a task. Unset is TASK_SUPPORT_OPTIONAL.
func WithTaskSupport(ts toolwirev1.TaskSupport) Option {
	return func(s *toolwirev1.ToolSpec) { s.TaskSupport = ts }
}

// WithUITemplate names the tool's widget template, a ui:// resource a
// client that renders widgets shows the tool's results in. The MCP
// endpoint writes it in the client's own key for the clients whose
// rendering profile asks for widget meta (openai/outputTemplate for
// ChatGPT; docs/mcp.md, "Client profiles"): the tool never names a
// client.
func WithUITemplate(uri string) Option {
	return func(s *toolwirev1.ToolSpec) { s.UiTemplate = uri }
}

// Definition is one way the tool is offered: to the requests of some model
// families in sessions of some modes (ToolSpec.definitions;
// docs/toolsets.md, "Definitions in the spec"). The first definition whose
// families and modes both match a request applies to its lists, exports
// and calls; an empty list matches any request.
type Definition struct {
	ModelFamilies []string // the policy's model families (gpt, claude, …); empty = any
	Modes         []string // session modes; empty = any, and none
	Hidden        bool     // not offered at all
	Description   string   // what the model reads instead of the summary; "" = the tool's own
	// InputSchema is a JSON Schema offered instead of the tool's own and
	// checked as well as it: a narrowing ("" = the tool's own).
	InputSchema string
}

// WithDefinition adds d after the definitions added before it: the first
// that matches a request applies. The registry checks them (at most 16,
// family and mode names, a schema that compiles).
func WithDefinition(d Definition) Option {
	return func(s *toolwirev1.ToolSpec) {
		s.Definitions = append(s.Definitions, &toolwirev1.ToolDefinition{
			ModelFamilies: append([]string(nil), d.ModelFamilies...), Modes: append([]string(nil), d.Modes...),
			Hidden: d.Hidden, Description: d.Description, InputSchemaJson: d.InputSchema})
	}
}
