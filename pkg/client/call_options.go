package client

import (
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// CallOption sets a per-call option of Call and Submit.
type CallOption func(*callSettings)

type callSettings struct {
	opts *toolwirev1.CallRequest
	wait time.Duration
}

// WithIdempotencyKey makes the call idempotent within the caller's tenant:
// a second call with the same key and the same tool and arguments is the
// first call again (same call id, same result, executed once); with other
// arguments it is answered CONFLICT.
func WithIdempotencyKey(key string) CallOption {
	return func(s *callSettings) { s.opts.IdempotencyKey = key }
}

// WithSession records the agent session the call belongs to (for intents,
// session limits and the audit trail).
func WithSession(id string) CallOption {
	return func(s *callSettings) { s.opts.Session = id }
}

// WithUser records the end user the call acts for.
func WithUser(id string) CallOption {
	return func(s *callSettings) { s.opts.User = id }
}

// WithRun records the agent run the call belongs to.
func WithRun(id string) CallOption {
	return func(s *callSettings) { s.opts.Run = id }
}

// WithTurn records the conversation turn the call belongs to (for
// per-turn budgets).
func WithTurn(id string) CallOption {
	return func(s *callSettings) { s.opts.Turn = id }
}

// WithSpecVersion pins the tool's spec version (its content hash, from
// ToolSpec.Version); the default is the version current at admission.
func WithSpecVersion(version string) CallOption {
	return func(s *callSettings) { s.opts.SpecVersion = version }
}

// WithParentCall names the call on whose behalf this one is made: an
// agent service that runs a sub-agent for a call passes that call's id to
// the sub-agent's calls. The parent must be a running call of the
// caller's tenant; the chain's depth and fan-out are bounded, the policy
// sees it (caller.parent, caller.depth), and cancelling the parent
// cancels this call (docs/delegation.md).
func WithParentCall(callID string) CallOption {
	return func(s *callSettings) { s.opts.ParentCallId = callID }
}

// WithModel names the model the call is made for: the policy's toolset
// for its family refuses a tool it does not offer that family
// (PERMISSION_DENIED naming the toolset) and holds the arguments to the
// schema variant it offers, and the policy's rules see caller.model and
// caller.model_family. A claim, never a grant (docs/toolsets.md).
func WithModel(model string) CallOption {
	return func(s *callSettings) { s.opts.Model = model }
}

// WithPinSessionVersions locks the session's spec versions (needs
// WithSession): the session's first call of a tool pins the version it
// runs, and its later calls of that tool run that version, until the
// orchestrator clears the pin (Client.ClearSessionPins) — whatever the
// registry's current version is by then. The policy can turn it on for
// the caller's tenant, agent or mode without this option.
func WithPinSessionVersions(pin bool) CallOption {
	return func(s *callSettings) { s.opts.PinSessionVersions = pin }
}

// WithApprovalToken sends the call again with the approval token of its
// *ApprovalRequiredError, once the orchestrator's user confirmed it: the
// call runs as the parked call (its id), once. It needs the "confirm"
// scope; a token that does not match the call exactly (caller, tool,
// version, arguments), has expired or was used is refused
// CONFIRMATION_REQUIRED.
func WithApprovalToken(token string) CallOption {
	return func(s *callSettings) { s.opts.ApprovalToken = token }
}

// WithScheduleToStart bounds how long the call may wait in the queue
// before a worker starts it; past it the call is answered EXPIRED and never
// runs. It can only tighten the tool's own limit; 0 keeps the tool's.
func WithScheduleToStart(d time.Duration) CallOption {
	return func(s *callSettings) { s.opts.ScheduleToStart = positive(d) }
}

// WithScheduleToClose bounds the whole call, queueing and every attempt
// included; past it the call is answered TIMEOUT. It can only tighten the
// tool's own limit; 0 keeps the tool's.
func WithScheduleToClose(d time.Duration) CallOption {
	return func(s *callSettings) { s.opts.ScheduleToClose = positive(d) }
}

// WithWait sets how long Call waits for the terminal response before it
// returns a *StateError with the call id (the call keeps running). 0, the
// default, is the dispatcher's default wait (60s unless configured), which
// the dispatcher also caps (15m unless configured). Submit ignores it.
//
// When ctx has a deadline, Call waits at most until shortly before it, so
// that a caller whose context runs out still learns the call id.
func WithWait(d time.Duration) CallOption {
	return func(s *callSettings) { s.wait = max(d, 0) }
}

func positive(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}
