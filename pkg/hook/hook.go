package hook

import "encoding/json"

// Action is what a hook answers it does with the call or the response.
// The empty action is Continue.
type Action string

// The actions of a before-hook (BeforeAnswer).
const (
	// Continue goes on to the next hook; it is also what an empty action
	// means, for both phases.
	Continue Action = "continue"
	// Allow stops the hooks: the policy rules still decide (deny wins).
	Allow Action = "allow"
	// Ask parks the call for an approver, unless a rule denies it.
	Ask Action = "ask"
	// Deny refuses the call PERMISSION_DENIED, with the answer's reason.
	Deny Action = "deny"
	// Rewrite replaces the call's arguments with the answer's, validated
	// against the tool's schema again; later hooks and the rules see them.
	Rewrite Action = "rewrite"
)

// The actions of an after-hook (AfterAnswer), besides Continue.
const (
	// Annotate records the answer's annotations (also recorded with any
	// other action) in the response's meta.
	Annotate Action = "annotate"
	// Redact lets pass only the answer's content and structured content:
	// one left out is dropped.
	Redact Action = "redact"
	// Replace replaces the response's content and structured content by
	// the answer's: one left out is kept.
	Replace Action = "replace"
	// Withhold gives the caller no result: an ok call is answered
	// PERMISSION_DENIED, a failed one keeps its error without content. No
	// later hook runs.
	Withhold Action = "withhold"
)

// PhaseAfter is AfterRequest.Phase.
const PhaseAfter = "after"

// Caller is the caller of the call a hook looks at.
type Caller struct {
	Tenant  string `json:"tenant"`
	Agent   string `json:"agent"`
	Session string `json:"session,omitempty"`
	User    string `json:"user,omitempty"`
	Run     string `json:"run,omitempty"`
}

// BeforeRequest is what a before-hook gets as its arguments.
type BeforeRequest struct {
	// Hook is the hook's id in the policy document.
	Hook        string `json:"hook"`
	Tool        string `json:"tool"`
	SpecVersion string `json:"spec_version"`
	// Arguments are the call's arguments, those the tool's schema marks
	// secret replaced by "[REDACTED]".
	Arguments json.RawMessage `json:"arguments"`
	Caller    Caller          `json:"caller"`
}

// BeforeAnswer is a before-hook's answer: its structured result, or its
// first text block, as JSON.
type BeforeAnswer struct {
	// Action is Continue (the next hook; the default), Allow (no more
	// hooks; the rules still decide), Ask (park the call for an
	// approver), Deny, or Rewrite (replace the arguments with Arguments).
	Action Action `json:"action"`
	// Reason says why: the caller is told it with a deny, the approver
	// with an ask. Default "hook <id>".
	Reason string `json:"reason,omitempty"`
	// Arguments are the arguments of a Rewrite.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// AfterRequest is what an after-hook gets as its arguments.
type AfterRequest struct {
	Hook string `json:"hook"`
	// Phase is always PhaseAfter.
	Phase       string `json:"phase"`
	CallID      string `json:"call_id"`
	Tool        string `json:"tool"`
	SpecVersion string `json:"spec_version"`
	// Arguments are the call's arguments, those the tool's schema marks
	// secret replaced by "[REDACTED]".
	Arguments json.RawMessage `json:"arguments"`
	Caller    Caller          `json:"caller"`
	Response  Response        `json:"response"`
}

// Response is the response an after-hook looks at, as an earlier hook of
// the call left it. Content blocks are MCP's (`{"type":"text","text":…}`).
type Response struct {
	OK bool `json:"ok"`
	// Content is a JSON array of MCP content blocks (empty: `[]`).
	Content json.RawMessage `json:"content"`
	// StructuredContent is the structured output, a JSON object; none
	// when the response has none.
	StructuredContent json.RawMessage `json:"structured_content,omitempty"`
	// Error is the error of a failed call.
	Error *Error `json:"error,omitempty"`
	// InputRequests, when the tool asks its caller for input instead of
	// answering (docs/mcp.md), are what it asks, by key: each
	// {"method":…,"params":…}. Such a response can be passed, annotated or
	// withheld, not redacted or replaced: a hook that must change what is
	// asked withholds it.
	InputRequests map[string]InputRequest `json:"input_requests,omitempty"`
}

// InputRequest is one thing a tool asks its caller for.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// Error is the error of a failed call an after-hook looks at.
type Error struct {
	// Type is the error's type as toolwire names it (ERROR_TYPE_…).
	Type    string `json:"type"`
	Message string `json:"message"`
}

// AfterAnswer is an after-hook's answer.
type AfterAnswer struct {
	// Action is Continue (the default), Annotate (record Annotations),
	// Redact (Content and StructuredContent are what may pass: one left
	// out is dropped), Replace (Content and StructuredContent replace the
	// response's: one left out is kept), or Withhold (the caller gets no
	// result: an ok call is answered PERMISSION_DENIED, a failed one keeps
	// its error without content).
	Action Action `json:"action"`
	// Reason is kept in the response's meta (at most 1 KiB) and, for a
	// Withhold, in its error.
	Reason string `json:"reason,omitempty"`
	// Content replaces the content blocks (a JSON array in MCP's form).
	Content json.RawMessage `json:"content,omitempty"`
	// StructuredContent replaces the structured output (an object, or
	// null to drop it).
	StructuredContent json.RawMessage `json:"structured_content,omitempty"`
	// Annotations are recorded in the response's meta (ResponseMeta.hooks)
	// with any action: at most 16, keys 1 to 64 bytes, values at most
	// 1 KiB, UTF-8.
	Annotations map[string]string `json:"annotations,omitempty"`
}
