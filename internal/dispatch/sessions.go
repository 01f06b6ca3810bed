package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Call admits a call and waits up to wait (0 = the default) for its
// terminal response. When the wait ends first the state is PENDING. When
// ctx ends first, the error is ctx's and, for an admitted call, the
// response still names it (state PENDING), so that the caller can cancel
// it or fetch its result. With apply_intents, the intents of the result
// are applied (applyResult) to the session of the call this replica
// admitted (o.Session) and checked against its spec version; a repeat
// answered with an earlier call's result applies to that call's session,
// read from the calls stream (storedCall). Never from the result: it is
// not to be believed.
func (d *Dispatcher) Call(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, error) {
	if !o.ApplyIntents {
		return d.call(ctx, id, o, wait)
	}
	if o.Session == "" {
		return nil, ErrNoSession
	}
	resp, call, err := d.callAdmitted(ctx, id, o, wait)
	if err != nil || resp.State != toolwirev1.CallState_CALL_STATE_DONE {
		return resp, err
	}
	// A refusal (no intents), or a repeat of an earlier call: nothing to
	// apply, or that call's own tool, version and session, as stored.
	at := admittedCall{tenant: id.Tenant, session: o.Session, tool: o.Tool}
	if call == nil && len(resp.Response.GetIntents()) > 0 {
		call, err = d.storedCall(ctx, id.Tenant, "", resp.CallId)
	}
	if call != nil {
		at = admittedOf(id.Tenant, call)
	}
	at.setsMode = setsModes(id)
	if err == nil && at.session == "" {
		err = ErrNoSession
	}
	var out intents.Outcome
	if err == nil {
		out, err = d.applyResult(ctx, at, &toolwirev1.GetResultResponse{CallId: resp.CallId, Response: resp.Response})
	}
	if err != nil {
		// The tool ran and its response is stored: answer it, say why the
		// intents are not applied (ApplyIntents can do it later).
		d.log.WarnContext(ctx, "applying intents failed", "call_id", resp.CallId, "err", err)
		resp.ApplyError = err.Error()
		return resp, nil
	}
	resp.Session = out.Session
	resp.RefusedIntents = refusedEntries(resp.CallId, out.Refused)
	return resp, nil
}

// admittedCall is what a result's intents are applied with: the tenant
// and session, tool and spec version of the call as a dispatcher admitted
// it.
type admittedCall struct {
	tenant, session, tool, version string
	// setsMode: the identity applying the intents may set the session's
	// mode (setsModes); without it SET_MODE is refused.
	setsMode bool
}

// setsModes reports whether id holds the authority to set a session's
// mode: the admin scope (SetSessionMode, and SET_MODE intents applied).
func setsModes(id identity.Identity) bool {
	return slices.ContainsFunc(id.Scopes, func(s string) bool { return s == "*" || s == identity.AdminScope })
}

// admittedOf is the admittedCall of call, a call of tenant.
func admittedOf(tenant string, call *toolwirev1.ToolCall) admittedCall {
	return admittedCall{tenant: tenant, session: call.GetCaller().GetSession(), tool: call.GetTool(), version: call.GetSpecVersion()}
}

// applyResult applies the intents of r, a finished call's stored result,
// to the session of at, the call as admitted, each checked where it is
// applied: against the intent catalog and the spec version the call was
// admitted with, read from the registry (intents.Screen). The tool, spec
// version and session the result names are the writer's to choose and
// are not used: a result naming another tool than the call's has every
// intent refused. The valid ones apply; the others are refused, recorded
// in the session's log (one entry per call), logged at WARN and counted
// (toolwire_dispatcher_intents_refused_total) when first recorded. A
// version the registry no longer holds has every intent refused; a
// registry that cannot be read is an error.
func (d *Dispatcher) applyResult(ctx context.Context, at admittedCall, r *toolwirev1.GetResultResponse) (intents.Outcome, error) {
	resp := r.GetResponse()
	in := intents.Response{CallID: r.GetCallId(), Intents: resp.GetIntents(), SetsMode: at.setsMode}
	if len(in.Intents) > 0 {
		if tool := resp.GetTool(); tool != at.tool {
			in.NoSpec = fmt.Sprintf("the result names tool %q; the call is of tool %q", cutName(tool), at.tool)
		} else {
			var err error
			if in.Spec, in.NoSpec, err = d.intentSpec(ctx, at.tool, at.version); err != nil {
				return intents.Outcome{}, err
			}
		}
	}
	out, err := d.applier.Apply(ctx, at.tenant, at.session, in)
	if err != nil {
		return out, err
	}
	if out.Applied > 0 {
		// This replica's next call in the session sees what was applied
		// (an END_SESSION) at once, not when the watch delivers it.
		if _, err := d.sessions.Refresh(ctx, at.tenant, at.session); err != nil {
			d.log.WarnContext(ctx, "re-reading the session after applying intents", "session", cutName(at.session), "err", err)
		}
	}
	if out.Recorded > 0 {
		d.metrics.IntentsRefused(out.Recorded)
		d.log.WarnContext(ctx, "intents refused at apply", "call_id", in.CallID, "tool", at.tool, "spec_version", at.version,
			"refused", len(out.Refused), "reason", cutName(out.Refused[0].Reason))
	}
	return out, nil
}

// cutName cuts a name or reason taken from a result, which nothing
// bounds, for a reason or a log line.
func cutName(s string) string {
	const n = 128
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// intentSpec is the spec version of tool that a result's intents are
// checked against, or why there is none.
func (d *Dispatcher) intentSpec(ctx context.Context, tool, version string) (*toolwirev1.ToolSpec, string, error) {
	if tool == "" || version == "" {
		return nil, "the result names no tool spec version to check its intents against", nil
	}
	ent, err := d.reg.GetVersion(ctx, tool, version)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return nil, fmt.Sprintf("spec version %q of tool %q is not in the registry", version, tool), nil
	case err != nil:
		return nil, "", fmt.Errorf("dispatch: the spec to check intents against: %w", err)
	}
	return ent.Spec, "", nil
}

// refusedEntries are the refusals as the API answers them: the first
// intents.MaxPerResponse one by one (intents.Refusal.Entry), and, when
// there are more, the summary the session's log records (intents.Summary).
func refusedEntries(callID string, refused []intents.Refusal) []*toolwirev1.AppliedIntent {
	if len(refused) == 0 {
		return nil
	}
	n := min(len(refused), intents.MaxPerResponse)
	entries := make([]*toolwirev1.AppliedIntent, n, n+1)
	for i, r := range refused[:n] {
		entries[i] = r.Entry(callID)
	}
	if len(refused) > n {
		entries = append(entries, intents.Summary(callID, refused))
	}
	return entries
}

// ErrNoSession: intents were to be applied, but the call names no session.
var ErrNoSession = errors.New("dispatch: apply_intents needs a session")

// ErrBadSession: a session name longer than MaxSessionBytes, or not
// UTF-8: refused by every RPC that names a session, as admission refuses
// a call naming one (a session the orchestrator could open but never
// call in).
var ErrBadSession = fmt.Errorf("dispatch: a session name is at most %d bytes of UTF-8", MaxSessionBytes)

// checkSession is ErrNoSession for no session, ErrBadSession for one
// admission would refuse.
func checkSession(session string) error {
	switch {
	case session == "":
		return ErrNoSession
	case len(session) > MaxSessionBytes || !utf8.ValidString(session):
		return ErrBadSession
	}
	return nil
}

// GetSession returns the reference applier's state of a session of the
// caller's tenant. A session is the tenant's: named by its callers, it is
// shared by every agent that names it, and its state is what all their
// calls' intents made it. Under VisibilityOwn its log shows a key that
// does not see every agent only the entries of calls it may see
// (reaches), so that it names no other agent's call nor shows its
// intents' payloads.
func (d *Dispatcher) GetSession(ctx context.Context, id identity.Identity, session string) (*toolwirev1.Session, error) {
	if err := identity.CheckTenant(id); err != nil {
		return nil, err
	}
	if err := checkSession(session); err != nil {
		return nil, err
	}
	s, err := d.applier.Get(ctx, id.Tenant, session)
	if err != nil || id.SeesEveryAgent(d.cfg.AgentVisibility) {
		return s, err
	}
	seen := map[string]bool{}
	log := s.Log[:0:0]
	for _, e := range s.GetLog() {
		ok, known := seen[e.GetCallId()]
		if !known {
			if ok, err = d.reaches(ctx, id, e.GetCallId()); err != nil {
				return nil, fmt.Errorf("dispatch: session log: %w", err)
			}
			seen[e.GetCallId()] = ok
		}
		if ok {
			log = append(log, e)
		}
	}
	s.Log = log
	return s, nil
}

// ApplyIntents applies the intents of a finished call of the caller's
// tenant to the call's session, each once, refusing those its tool's spec
// version does not allow (applyResult). The session, tool and spec
// version are the stored call's (storedCall: the calls stream or the
// call's approval, which only dispatchers write), never the result's. It
// returns ErrUnknownCall for a call it does not know, ErrNotFinished
// while the call runs, ErrCallNotStored for a finished call that is not
// stored (refused at admission, or past the stream's retention), and
// ErrNoSession when the call named no session.
func (d *Dispatcher) ApplyIntents(ctx context.Context, id identity.Identity, callID string) (*toolwirev1.ApplyIntentsResponse, error) {
	// A caller may apply a call's intents the instant its result reached
	// it: the result can reach the caller a moment before the results
	// stream serves it, so wait briefly rather than answer "not finished".
	r, err := d.GetResult(ctx, id, callID, applyWait)
	if err != nil {
		return nil, err
	}
	switch r.State {
	case toolwirev1.CallState_CALL_STATE_DONE:
	case toolwirev1.CallState_CALL_STATE_PENDING:
		return nil, ErrNotFinished
	default:
		return nil, ErrUnknownCall
	}
	call, err := d.storedCall(ctx, id.Tenant, "", callID)
	if err != nil {
		return nil, fmt.Errorf("dispatch: apply intents of %s: %w", callID, err)
	}
	at := admittedOf(id.Tenant, call)
	at.setsMode = setsModes(id)
	if at.session == "" {
		return nil, ErrNoSession
	}
	out, err := d.applyResult(ctx, at, r)
	if err != nil {
		return nil, fmt.Errorf("dispatch: apply intents of %s: %w", callID, err)
	}
	return &toolwirev1.ApplyIntentsResponse{Session: out.Session, Applied: int32(out.Applied), Skipped: int32(out.Skipped),
		Refused: refusedEntries(callID, out.Refused)}, nil
}

// applyWait bounds how long ApplyIntents waits for a result.
const applyWait = 2 * time.Second

// ErrNotFinished: the call has no result yet.
var ErrNotFinished = errors.New("dispatch: the call has not finished")

// ErrUnknownMode: the mode asked for is not one the policy in force for
// the caller's tenant declares (modes:).
var ErrUnknownMode = errors.New("dispatch: the policy in force declares no such mode")

// ErrNotAdmin: the caller lacks the admin scope an action needs.
var ErrNotAdmin = errors.New("dispatch: this needs the admin scope")

// SetSessionMode sets the mode of a session of the caller's tenant, as the
// orchestrator does: a SET_MODE intent applied by the reference applier
// (each request once), after which this replica's session view is read
// again, so that its next call in the session is decided in the mode
// (other replicas: when their watch delivers it). mode must be one the
// policy in force declares (ErrUnknownMode); "" clears it. A mode narrows
// what a session's calls may do, so setting it is the orchestrator's, not
// the agent's: the caller needs the admin scope (ErrNotAdmin). Errors:
// ErrNoSession for an empty session.
func (d *Dispatcher) SetSessionMode(ctx context.Context, id identity.Identity, session, mode string) (*toolwirev1.Session, error) {
	if err := identity.CheckTenant(id); err != nil {
		return nil, err
	}
	if !setsModes(id) {
		return nil, ErrNotAdmin
	}
	if err := checkSession(session); err != nil {
		return nil, err
	}
	if p := d.policyFor(id.Tenant); mode != "" && !p.HasMode(mode) {
		return nil, fmt.Errorf("%w: %q (declared: %s)", ErrUnknownMode, cutName(mode), strings.Join(p.Modes(), ", "))
	}
	payload, err := json.Marshal(map[string]string{"mode": mode})
	if err != nil {
		return nil, fmt.Errorf("dispatch: set mode: %w", err)
	}
	return d.applySessionIntent(ctx, id.Tenant, session, &toolwirev1.Intent{Id: "mode", Type: intents.SetMode, PayloadJson: string(payload)})
}

// ClearSessionPins clears the spec versions a session of the caller's
// tenant pins (Session.pinned_versions): tool's, or every tool's when tool
// is "". The session's next call of a tool, with pinning in force, pins
// the version current then. Clearing re-pins what a session runs, so it
// is the orchestrator's, like SetSessionMode: the caller needs the admin
// scope (ErrNotAdmin). This replica's session view is read again at once,
// the others' when their watch delivers the change. Errors: ErrNoSession
// for an empty session.
func (d *Dispatcher) ClearSessionPins(ctx context.Context, id identity.Identity, session, tool string) (*toolwirev1.Session, error) {
	if err := identity.CheckTenant(id); err != nil {
		return nil, err
	}
	if !setsModes(id) {
		return nil, ErrNotAdmin
	}
	if err := checkSession(session); err != nil {
		return nil, err
	}
	s, err := d.applier.ClearPins(ctx, id.Tenant, session, tool)
	if err != nil {
		return nil, fmt.Errorf("dispatch: clear pins: %w", err)
	}
	if _, err := d.sessions.Refresh(ctx, id.Tenant, session); err != nil {
		d.log.WarnContext(ctx, "re-reading the session after clearing its pins", "session", cutName(session), "err", err)
	}
	return s, nil
}
