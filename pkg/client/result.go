package client

import (
	"encoding/json"
	"strings"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Result is the terminal response of a call: a success or a tool error.
type Result struct {
	// CallID is the call's id.
	CallID string
	// Response is the response envelope as the worker (or, for a call
	// refused at admission, the dispatcher) produced it. Never nil.
	Response *toolwirev1.ToolResponse
	// Session is the session after the reference applier applied the
	// response's intents (Call with WithApplyIntents); nil otherwise.
	Session *toolwirev1.Session
	// ApplyError says why WithApplyIntents could not apply the intents;
	// the response is still the call's (apply them later with
	// Client.ApplyIntents).
	ApplyError string
}

// OK reports whether the call succeeded.
func (r *Result) OK() bool { return r.Response.GetOk() }

// Err returns nil when the call succeeded, else a *ToolError describing
// the failure.
func (r *Result) Err() error {
	if r.OK() {
		return nil
	}
	return toolError(r.Response)
}

// OverBudget returns what the dispatcher recorded when the call took
// longer than its soft latency budget (the budget, how long it took, where
// the budget came from; docs/policy.md, "Latency budgets"), nil when it
// did not. Never a failure: the call succeeded or failed on its own. Every
// answer of a call says the same: Call, GetResult and Watch's FINISHED,
// which a LATENCY_BUDGET_EXCEEDED event precedes.
func (r *Result) OverBudget() *toolwirev1.LatencyBudgetExceeded {
	return r.Response.GetMeta().GetLatencyBudgetExceeded()
}

// Content returns the content blocks, in order.
func (r *Result) Content() []*toolwirev1.Content { return r.Response.GetContent() }

// Text returns the text content blocks joined by newlines; other kinds of
// blocks (images, audio, resources) are left out.
func (r *Result) Text() string {
	var parts []string
	for _, c := range r.Response.GetContent() {
		if t, ok := c.GetKind().(*toolwirev1.Content_Text); ok {
			parts = append(parts, t.Text.GetText())
		}
	}
	return strings.Join(parts, "\n")
}

// Structured decodes the structured output into v with encoding/json. It
// returns the *ToolError of a failed call, ErrNoStructuredOutput when the
// tool gave none, or the decoding error.
func (r *Result) Structured(v any) error {
	if err := r.Err(); err != nil {
		return err
	}
	s := r.Response.GetStructuredJson()
	if s == "" {
		return ErrNoStructuredOutput
	}
	return json.Unmarshal([]byte(s), v)
}

// Intents returns the state changes the tool asks the orchestrator to
// make, in the order they apply. Each intent's id is unique within the
// call: remember applied ids to apply each intent once.
func (r *Result) Intents() []*toolwirev1.Intent { return r.Response.GetIntents() }
