package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ErrSessionsHidden: under agent visibility "own" a key sees only its own
// agent's calls, and a session has no owner agent: listing the tenant's
// sessions needs the admin or approve scope
// (identity.Identity.SeesEveryAgent).
var ErrSessionsHidden = errors.New("dispatch: listing sessions needs the admin or approve scope under agent visibility \"own\"")

// ErrBadEndReason: an end reason longer than MaxEndReasonBytes, or not
// UTF-8.
var ErrBadEndReason = errors.New("dispatch: the end reason is too long or not UTF-8")

// MaxEndReasonBytes bounds EndSession's reason (END_SESSION's payload
// schema allows 1,000 characters; the API 1,000 bytes).
const MaxEndReasonBytes = 1000

// ListSessions lists one page of the sessions of the caller's tenant
// (intents.List: the order of their last update, oldest first; each
// without its log, state values and applied keys), filtered by state and
// mode; q.Tenant is the caller's, whatever q says. A session is the
// tenant's, shared by every agent that names it, so under VisibilityOwn a
// key that does not see every agent (no admin or approve scope) may not
// list them (ErrSessionsHidden); under VisibilityTenant every key of the
// tenant may. intents.ErrBadPageToken for a token no listing returned.
func (d *Dispatcher) ListSessions(ctx context.Context, id identity.Identity, q intents.ListQuery) (intents.ListPage, error) {
	if err := identity.CheckTenant(id); err != nil {
		return intents.ListPage{}, err
	}
	if !id.SeesEveryAgent(d.cfg.AgentVisibility) {
		return intents.ListPage{}, ErrSessionsHidden
	}
	q.Tenant = id.Tenant
	page, err := intents.List(ctx, d.bus.JS, d.bus.Config.SessionsBucket(), q)
	if err != nil && !errors.Is(err, intents.ErrBadPageToken) {
		return page, fmt.Errorf("dispatch: %w", err)
	}
	return page, err
}

// EndSession ends a session of the caller's tenant, as the orchestrator
// does: an END_SESSION intent with reason, applied by the reference
// applier (the same record, compare-and-set write and log entry as an
// END_SESSION a tool returns), after which this replica's session view is
// read again, so that its next call in the session is refused
// SESSION_INACTIVE (other replicas: when their watch delivers it). Ending
// an ended session applies nothing and answers its state (the first end's
// reason stands: intents keeps it also when two ends race). A session
// nothing was applied to is ended all the same, before its first call.
// Needs the admin scope (ErrNotAdmin); ErrNoSession for an empty session,
// ErrBadEndReason for a reason over MaxEndReasonBytes.
func (d *Dispatcher) EndSession(ctx context.Context, id identity.Identity, session, reason string) (*toolwirev1.Session, error) {
	if err := identity.CheckTenant(id); err != nil {
		return nil, err
	}
	if !setsModes(id) {
		return nil, ErrNotAdmin
	}
	if err := checkSession(session); err != nil {
		return nil, err
	}
	if len(reason) > MaxEndReasonBytes || !utf8.ValidString(reason) {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrBadEndReason, len(reason), MaxEndReasonBytes)
	}
	s, err := d.applier.Get(ctx, id.Tenant, session)
	if err != nil {
		return nil, fmt.Errorf("dispatch: end session: %w", err)
	}
	if s.GetEnded() {
		return s, nil
	}
	payload, err := json.Marshal(map[string]string{"reason": reason})
	if err != nil {
		return nil, fmt.Errorf("dispatch: end session: %w", err)
	}
	return d.applySessionIntent(ctx, id.Tenant, session, &toolwirev1.Intent{Id: "end", Type: intents.EndSession, PayloadJson: string(payload)})
}

// applySessionIntent applies one intent of the orchestrator's session
// RPCs (SET_MODE, END_SESSION) to a tenant's session with the reference
// applier — the record, compare-and-set write and log entry of an intent
// a tool returns — then reads the session again, so that this replica's
// next call sees the change. A refused intent is an error: ErrUnknownMode
// for SET_MODE, ErrBadEndReason for END_SESSION.
func (d *Dispatcher) applySessionIntent(ctx context.Context, tenant, session string, in *toolwirev1.Intent) (*toolwirev1.Session, error) {
	out, err := d.applier.Apply(ctx, tenant, session, intents.Response{CallID: strings.ToLower(in.Type) + "-" + ulid.Make().String(),
		Intents: []*toolwirev1.Intent{in}, Spec: &toolwirev1.ToolSpec{Name: "toolwire.session", Intents: []string{in.Type}},
		SetsMode: in.Type == intents.SetMode})
	if err != nil {
		return nil, fmt.Errorf("dispatch: %s: %w", in.Type, err)
	}
	if len(out.Refused) > 0 {
		refused := ErrBadEndReason
		if in.Type == intents.SetMode {
			refused = ErrUnknownMode
		}
		return nil, fmt.Errorf("%w: %s", refused, out.Refused[0].Reason)
	}
	if _, err := d.sessions.Refresh(ctx, tenant, session); err != nil {
		d.log.WarnContext(ctx, "re-reading the session after applying an intent to it", "session", cutName(session), "intent", in.Type, "err", err)
	}
	return out.Session, nil
}
