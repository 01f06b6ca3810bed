package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/intents"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// pinStep pins, for a call whose session pins versions and pins none yet
// for its tool (lookup set a.pin), the version lookup resolved into the
// session's record (intents.Applier.Pin: Session.pinned_versions, by
// compare-and-set), once the call is known to name a tool the caller may
// call and a pool serves; then the session view is read again, so that
// this replica's next call sees the pin at once (the others' when their
// watch delivers it). So a pin is written once per session and tool. The
// first pin stands: when another call of the session pinned another
// version first, this call runs that one (looked up again). A session at intents.MaxPins is
// refused CONFLICT; a write that fails is INTERNAL, never a call run
// unpinned.
func (a *admission) pinStep(ctx context.Context) verdict {
	if !a.pin {
		return next
	}
	d, o := a.d, a.req
	pinned, _, err := d.applier.Pin(ctx, a.id.Tenant, o.Session, o.Tool, a.spec.Version)
	switch {
	case errors.Is(err, intents.ErrTooManyPins):
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFLICT,
			fmt.Sprintf("session %q cannot pin tool %q: it pins %d tools, the most a session may", cutName(o.Session), o.Tool, intents.MaxPins))
		te.Suggestion = "clear the session's pins (`toolctl session repin " + cutName(o.Session) + "`, the ClearSessionPins RPC, admin scope)"
		return a.refused(te, nil)
	case err != nil:
		d.log.ErrorContext(ctx, "pinning a session's spec version failed", "session", cutName(o.Session), "tool", o.Tool, "err", err)
		return a.refused(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, "pinning the session's spec version failed"), nil)
	}
	if _, err := d.sessions.Refresh(ctx, a.id.Tenant, o.Session); err != nil {
		d.log.WarnContext(ctx, "re-reading the session after pinning", "session", cutName(o.Session), "err", err)
	}
	if pinned == a.spec.Version {
		a.pinned = pinned
		return next
	}
	// Another call of the session pinned another version first: this call
	// runs that one, looked up and checked as if the session had held the
	// pin when the call came (a differing spec_version is refused) — its
	// scopes too, which are the version's own (review: a caller without
	// the scope a pinned older version needs ran it), and its
	// definitions.
	st := a.session
	st.Pins = map[string]string{o.Tool: pinned}
	a.session, a.pin = st, false
	for _, step := range []func(*admission, context.Context) verdict{(*admission).lookup, (*admission).scopes, (*admission).definitionStep} {
		if v := step(a, ctx); v != next {
			return v
		}
	}
	return a.poolStep(ctx)
}
