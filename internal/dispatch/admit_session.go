package dispatch

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/sessionview"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// sessionStep is the session step, before the policy: a call naming a
// session that END_SESSION ended is refused SESSION_INACTIVE (recorded,
// nothing queued). The session's state is the dispatcher's session view
// (internal/sessionview): cached, kept current by a watch of the sessions
// bucket, read from the bucket on a miss. A session that cannot be read
// is an error, never a guess.
//
// The session rules of the policy in force (policy.SessionRules, the
// document's sessions: section) apply here too, so that a restricted or
// ended session cannot be escaped by leaving it out or naming another:
// under required a call naming no session is refused PERMISSION_DENIED;
// under opened_only a call naming a session the bucket does not hold is
// refused SESSION_INACTIVE; a call whose session has no mode, or that
// names none, is decided in default_mode. A hook's own call (the
// dispatcher's, naming no session) is exempt: the operator bound it.
func (a *admission) sessionStep(ctx context.Context) verdict {
	if isHookCall(ctx) {
		return next
	}
	p := a.d.policyFor(a.id.Tenant)
	rules := p.Sessions()
	session := a.req.GetSession()
	if session == "" {
		if rules.Required {
			return a.refused(sessionRequired(), sessionDecision(p, "sessions.required", "the policy requires a session"))
		}
		a.session = sessionview.State{Mode: rules.DefaultMode}
		return next
	}
	if len(session) > MaxSessionBytes || !utf8.ValidString(session) {
		return a.refused(registry.Violation("session", fmt.Sprintf("a session name is at most %d bytes of UTF-8", MaxSessionBytes)), nil)
	}
	st, err := a.d.sessions.State(ctx, a.id.Tenant, session)
	if err == nil && rules.OpenedOnly && !st.Exists {
		// Opened on another replica a moment ago, and cached here as
		// never written until the watch delivers the write: read again
		// before refusing.
		st, err = a.d.sessions.Refresh(ctx, a.id.Tenant, session)
	}
	if err != nil {
		return a.answered(nil, nil, fmt.Errorf("dispatch: the call's session: %w", err))
	}
	if st.Ended {
		return a.refused(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, sessionEnded(session, st.EndReason)), nil)
	}
	if rules.OpenedOnly && !st.Exists {
		return a.refused(sessionNotOpened(session), sessionDecision(p, "sessions.opened_only", "the policy admits only opened sessions"))
	}
	st.Mode = rules.ModeOf(st.Mode)
	a.session = st
	return next
}

// MaxSessionBytes bounds the session a call names: a session's name is
// stored in its record (the sessions bucket every tenant shares) and
// cached by every replica. A longer one, or one that is not UTF-8, is
// refused VALIDATION.
const MaxSessionBytes = 256

// sessionEnded says that session ended, and why (reason, "" = not said).
func sessionEnded(session, reason string) string {
	msg := fmt.Sprintf("session %q has ended", cutName(session))
	if reason != "" {
		msg += ": " + reason
	}
	return msg
}

// sessionRequired is the refusal of a call naming no session under the
// policy's sessions.required.
func sessionRequired() *toolwirev1.ToolError {
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
		"the tenant's policy requires every call to name its session (sessions.required); this call names none")
	te.Suggestion = "name the call's session: CallRequest.session, MCP _meta \"io.toolwire/session\", or `toolctl call --session`"
	return te
}

// sessionNotOpened is the refusal of a call naming a session nobody
// opened under the policy's sessions.opened_only.
func sessionNotOpened(session string) *toolwirev1.ToolError {
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE,
		fmt.Sprintf("session %q was never opened, and the tenant's policy admits only calls in opened sessions (sessions.opened_only)", cutName(session)))
	te.Suggestion = "the orchestrator opens a session with SetSessionMode (`toolctl session mode SESSION MODE`; the mode \"\" opens it without one)"
	return te
}

// sessionDecision is the decision a session-rule refusal is recorded
// with: a deny of the policy in force by the named rule.
func sessionDecision(p *policy.Policy, rule, reason string) *toolwirev1.PolicyDecision {
	return &toolwirev1.PolicyDecision{Outcome: toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, Version: p.Version(), RuleId: rule, Reason: reason}
}
