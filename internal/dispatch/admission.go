package dispatch

import (
	"context"
	"time"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/jsonvalue"
	"github.com/toolwire/toolwire/internal/limitgate"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/poolview"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/sessionview"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// admission is one call's way through admission (DESIGN §6): what every
// step needs, and what the steps before it found. It lives for one
// request; the steps fill it in order (admissionSteps), and settle carries
// out the verdict of the step that stopped it.
type admission struct {
	d *Dispatcher // the dispatcher admitting it

	// The request, as the API gave it.
	id      identity.Identity
	req     *toolwirev1.CallRequest
	callID  string    // a fresh ULID; a redeemed token's call takes its parked call's
	now     time.Time // when admission began
	waiting bool      // the caller waits in Call for the result

	// What the steps found.
	session sessionview.State    // session: the state of the call's session (zero without one)
	entry   *registry.Entry      // lookup: the registry entry (its current version, or the pinned one)
	pinned  string               // lookup: the version the call's session pins for the tool ("" = none)
	pin     bool                 // lookup: the session pins versions and none yet for the tool (admit_pin.go)
	spec    *toolwirev1.ToolSpec // lookup: entry.Spec
	args    []byte               // arguments: the exact JSON the call runs with
	doc     *jsonvalue.Doc       // arguments: args parsed (once), until a before-hook rewrites them
	// parsed is the arguments in the policy's reading, parsed once by the
	// first step that needs them (policyArgs); a rewrite drops it.
	parsed  *policy.Args
	round   *toolwirev1.InputRound     // input: the round a call answering a tool's request continues
	call    *toolwirev1.ToolCall       // call: the call as it will be published
	chain   *link                      // delegation: the call's link in its chain (nil = no parent)
	family  string                     // toolset: the family of the request's model ("" = none)
	toolset *policy.Toolset            // toolset: the family's toolset in the policy in force (nil = none)
	def     *toolwirev1.ToolDefinition // definition: the spec's definition the family and mode are offered (nil = none)
	linked  string                     // delegation: the call id the link was recorded under (the minted one)
	counted chainCount                 // delegation: the counts the call was added to (its parent's children, its root's chain)

	pd      *toolwirev1.PolicyDecision // the decision to record (policy, a hook, the loop guard, limits)
	ask     *asked                     // policy or loop guard: park for an approver, or redeem a token
	hookAsk *asked                     // a before-hook asks (a deny of the policy still wins)

	w        *waiter           // waiter: the caller's place in Call; nil for Submit
	admitted poolview.Admitted // overload: the pool's load that admitted it (settled once the publish is answered)
	subject  string            // overload: the call's subject on the calls stream
	ticket   *limitgate.Ticket // limits: what the call took (slots, budget units)
	claimed  bool              // idempotency: the request's key is bound to this call
	keyRev   uint64            // idempotency: the revision of the claim (releaseKey)

	// What settle carries out.
	step       string // the step that stopped the call (admissionSteps)
	refusal    *toolwirev1.ToolError
	overloaded string // overload: the cause (the call is not recorded unless keyed)
	target     string // overload: the pool or store that refused it
	sent       bool   // publish: its admission record may be out; an overload refusal is recorded after it
	published  bool   // publish: the call was sent to the calls stream (it may be stored, confirmed or not)
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
	run  func(a *admission, ctx context.Context) verdict
}

// admissionSteps is the order of admission, written once. Each step can
// stop the call; a refusal consumes nothing later in the list. The
// session step is first: lookup resolves the version the session pins. The loop
// guard runs only for a call the policy allowed; the approval step sends
// an asked call (or one a token covers) off to settle; limits are last so
// that a refused call spends no budget.
var admissionSteps = [...]admissionStep{
	{"session", (*admission).sessionStep},         // admit_session.go
	{"lookup", (*admission).lookup},               // admit_lookup.go
	{"scopes", (*admission).scopes},               // admit_scopes.go
	{"toolset", (*admission).toolsetStep},         // admit_toolset.go
	{"definition", (*admission).definitionStep},   // admit_toolset.go
	{"pool", (*admission).poolStep},               // admit_pool.go
	{"pin", (*admission).pinStep},                 // admit_pin.go
	{"arguments", (*admission).arguments},         // admit_arguments.go
	{"variant", (*admission).variantStep},         // admit_toolset.go
	{"input", (*admission).continues},             // admit_input.go
	{"call", (*admission).buildCall},              // admit_call.go
	{"delegation", (*admission).delegationStep},   // admit_delegation.go
	{"after-hooks", (*admission).afterHookStep},   // admit_afterhooks.go
	{"before-hooks", (*admission).beforeHookStep}, // admit_beforehooks.go
	{"policy", (*admission).policyStep},           // admit_policy.go
	{"loop-guard", (*admission).loopGuardStep},    // admit_loopguard.go
	{"waiter", (*admission).waiterStep},           // admit_waiter.go
	{"idempotency", (*admission).idempotency},     // admit_idempotency.go
	{"approval", (*admission).approval},           // admit_approval.go
	{"overload", (*admission).overload},           // admit_overload.go
	{"limits", (*admission).limitStep},            // admit_limits.go
	{"latency", (*admission).latencyStep},         // admit_latency.go
	{"publish", (*admission).publishStep},         // admit_publish.go
}

// admitAndPublish runs the admission steps in order and settles the call
// with the verdict of the step that stopped it.
func (a *admission) admitAndPublish(ctx context.Context) (*Submitted, *waiter, error) {
	defer func() {
		a.admitted.Settle() // the publish is answered, or nothing is published
	}()
	for _, s := range admissionSteps {
		if v := s.run(a, ctx); v != next {
			a.step = s.name
			return a.settle(ctx, v)
		}
	}
	return a.settle(ctx, done) // the publish step answers every call it reaches
}

// settle carries out a verdict.
func (a *admission) settle(ctx context.Context, v verdict) (*Submitted, *waiter, error) {
	switch v {
	case refuse:
		return a.refuseCall(ctx), nil, nil
	case park:
		return a.parkCall(ctx)
	case redeem:
		a.forgetChain(ctx) // runs as the parked call, which has its own link
		return a.redeem(ctx)
	}
	if !a.published {
		// Answered without a publish of its own (as another call, a key
		// conflict, a busy key, an error): not a child.
		a.forgetChain(ctx)
	}
	return a.result, a.w, a.err
}

// refuseCall answers a.refusal: it takes the secret argument values out of
// it, releases the caller's waiter, records it as the call's REJECTED
// event (with the decision that refused it) so that any replica answers
// the id with it, and only then releases the idempotency key (a retry that
// found the key claimed waits on this call id). An overload refusal of a
// call without a key is not recorded (admit_overload.go), unless its
// admission record may be out (a publish the calls stream refused).
func (a *admission) refuseCall(ctx context.Context) *Submitted {
	d := a.d
	if a.overloaded == "" {
		a.redactRefusal()
	}
	d.log.DebugContext(ctx, "call refused", "call_id", a.callID, "tool", a.req.Tool, "step", a.step,
		"error_type", a.refusal.GetType(), "rule", a.pd.GetRuleId())
	if a.w != nil {
		if a.w.accepted != nil {
			a.w.accepted.Stop()
		}
		a.w.cancel()
	}
	if a.overloaded == "" || a.claimed || a.sent {
		a.recordRejection(ctx)
	}
	if a.claimed {
		d.releaseKey(a.id, a.req, a.keyRev)
	}
	a.forgetChain(ctx) // a refused child is no child
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

// policyArgs returns the call's arguments in the policy's reading: the
// document the arguments step parsed, or, after a before-hook rewrote
// them, a parse of the rewrite; at most once per admission.
func (a *admission) policyArgs() (*policy.Args, error) {
	if a.parsed != nil {
		return a.parsed, nil
	}
	var args *policy.Args
	var err error
	if a.doc != nil {
		args, err = policy.ArgsFrom(a.doc)
	} else {
		args, err = policy.ParseArgs(a.call.Arguments)
	}
	if err != nil {
		return nil, err
	}
	a.parsed = args
	return args, nil
}

// forgetChain removes the call's delegation link, if the delegation step
// recorded one, and takes it out of the counts it was added to, so that
// it takes no place among its parent's children nor in its chain.
func (a *admission) forgetChain(ctx context.Context) {
	if a.chain != nil && a.linked != "" {
		a.d.forgetLink(ctx, a.id.Tenant, a.linked, *a.chain)
		a.uncount(ctx)
		a.linked = ""
	}
}
