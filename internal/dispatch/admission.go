package dispatch

import (
	"context"
	"time"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/limitgate"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// admission is one call's way through admission (DESIGN §6): what every
// step needs, and what the steps before it found. It lives for one
// request; the steps fill it in order (admissionSteps), and settle carries
// out the verdict of the step that stopped it.
type admission struct {
	// The request, as the API gave it.
	id      identity.Identity
	req     *toolwirev1.CallRequest
	callID  string    // a fresh ULID; a redeemed token's call takes its parked call's
	now     time.Time // when admission began
	waiting bool      // the caller waits in Call for the result

	// What the steps found.
	entry *registry.Entry      // lookup: the registry entry (its current version, or the pinned one)
	spec  *toolwirev1.ToolSpec // lookup: entry.Spec
	args  []byte               // arguments: the exact JSON the call runs with
	// parsed is the arguments in the policy's reading, parsed once by the
	// first step that needs them (policyArgs); a rewrite drops it.
	parsed *policy.Args
	input  *toolwirev1.InputRound // input: the round a call answering a tool's request continues
	call   *toolwirev1.ToolCall   // call: the call as it will be published

	pd      *toolwirev1.PolicyDecision // the decision to record (policy, a hook, the loop guard, limits)
	ask     *asked                     // policy or loop guard: park for an approver, or redeem a token
	hookAsk *asked                     // a before-hook asks (a deny of the policy still wins)

	w       *waiter // waiter: the caller's place in Call; nil for Submit
	pool    *poolLoad
	subject string            // overload: the call's subject on the calls stream
	ticket  *limitgate.Ticket // limits: what the call took (slots, budget units)
	claimed bool              // idempotency: the request's key is bound to this call

	// What settle carries out.
	refusal    *toolwirev1.ToolError
	overloaded string // overload: the cause (the call is not recorded unless keyed)
	target     string // overload: the pool or store that refused it
	result     *Submitted
	err        error
}

// verdict is what a step decides about the call.
type verdict uint8

const (
	next   verdict = iota // on to the next step
	refuse                // answer a.refusal (recorded with a.pd), nothing queued
	park                  // park the call for an approver (a.ask)
	redeem                // publish the parked call a.ask's token approves
	done                  // the step answered: a.result, a.w and a.err
)

// admissionStep is one step: a name (its file is named after it) and
// what it does.
type admissionStep struct {
	name string
	run  func(d *Dispatcher, ctx context.Context, a *admission) verdict
}

// admissionSteps is the order of admission, written once. Each step can
// stop the call; a refusal consumes nothing later in the list. The loop
// guard runs only for a call the policy allowed; the approval step sends
// an asked call (or one a token covers) off to settle; limits are last so
// that a refused call spends no budget. (Set by init: the steps reach
// Call, for a hook's own call, which runs admission.)
var admissionSteps []admissionStep

func init() {
	admissionSteps = []admissionStep{
		{"lookup", (*Dispatcher).lookup},             // admit_lookup.go
		{"scopes", (*Dispatcher).scopes},             // admit_scopes.go
		{"pool", (*Dispatcher).pool},                 // admit_pool.go
		{"arguments", (*Dispatcher).arguments},       // admit_arguments.go
		{"input", (*Dispatcher).continues},           // admit_input.go
		{"call", (*Dispatcher).buildCall},            // admit_call.go
		{"after-hooks", (*Dispatcher).afterHookStep}, // admit_afterhooks.go
		{"before-hooks", (*Dispatcher).beforeHookStep},
		{"policy", (*Dispatcher).policyStep},        // admit_policy.go
		{"loop-guard", (*Dispatcher).loopGuardStep}, // admit_loopguard.go
		{"waiter", (*Dispatcher).waiterStep},        // admit_waiter.go
		{"idempotency", (*Dispatcher).idempotency},  // admit_idempotency.go
		{"approval", (*Dispatcher).approval},        // admit_approval.go
		{"overload", (*Dispatcher).overload},        // admit_overload.go
		{"limits", (*Dispatcher).limitStep},         // admit_limits.go
		{"publish", (*Dispatcher).publishStep},      // admit_publish.go
	}
}

// admitAndPublish runs the admission steps in order and settles the call
// with the verdict of the step that stopped it.
func (d *Dispatcher) admitAndPublish(ctx context.Context, a *admission) (*Submitted, *waiter, error) {
	defer func() {
		if a.pool != nil {
			a.pool.settle() // the publish is answered, or nothing is published
		}
	}()
	for _, s := range admissionSteps {
		if v := s.run(d, ctx, a); v != next {
			return d.settle(ctx, a, v)
		}
	}
	return d.settle(ctx, a, done) // the publish step answers every call it reaches
}

// settle carries out a verdict.
func (d *Dispatcher) settle(ctx context.Context, a *admission, v verdict) (*Submitted, *waiter, error) {
	switch v {
	case refuse:
		return d.refuseCall(ctx, a), nil, nil
	case park:
		return d.parkCall(ctx, a)
	case redeem:
		return d.redeem(ctx, a)
	}
	return a.result, a.w, a.err
}

// refuseCall answers a.refusal: it takes the secret argument values out of
// it, releases the caller's waiter, records it as the call's REJECTED
// event (with the decision that refused it) so that any replica answers
// the id with it, and only then releases the idempotency key (a retry that
// found the key claimed waits on this call id). An overload refusal of a
// call without a key is not recorded (admit_overload.go).
func (d *Dispatcher) refuseCall(ctx context.Context, a *admission) *Submitted {
	if a.overloaded == "" {
		d.redactRefusal(a)
	}
	if a.w != nil {
		if a.w.accepted != nil {
			a.w.accepted.Stop()
		}
		a.w.cancel()
	}
	if a.overloaded == "" || a.claimed {
		d.recordRejection(ctx, a)
	}
	if a.claimed {
		d.releaseKey(a.id, a.req)
	}
	if a.overloaded != "" {
		d.metrics.Overloaded(a.overloaded, a.target)
	}
	return &Submitted{CallID: a.callID, Rejected: envelope.Rejection(a.callID, a.req.Tool, a.refusal, a.now)}
}

// refused stops the call with te; pd is the decision that refused it (nil
// when no decision did).
func (a *admission) refused(te *toolwirev1.ToolError, pd *toolwirev1.PolicyDecision) verdict {
	a.refusal, a.pd = te, pd
	return refuse
}

// answered stops the call with an answer a step made.
func (a *admission) answered(s *Submitted, w *waiter, err error) verdict {
	a.result, a.w, a.err = s, w, err
	return done
}

// policyArgs returns the call's arguments in the policy's reading, parsed
// at most once per admission (a rewrite by a before-hook clears them).
func (a *admission) policyArgs() (*policy.Args, error) {
	if a.parsed != nil {
		return a.parsed, nil
	}
	args, err := policy.ParseArgs(a.call.Arguments)
	if err != nil {
		return nil, err
	}
	a.parsed = args
	return args, nil
}
