package dashboard

import (
	"net/http"
	"slices"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// delegationView is a call's place in its delegation chain as its page
// shows it: its ancestors root first, its direct children oldest first,
// and how many more children there are than shown.
type delegationView struct {
	Ancestors []chainCall
	Children  []*toolwirev1.DelegatedCall
	More      int32
}

// chainCall is an ancestor with its role: root, parent, or above (a call
// between them).
type chainCall struct {
	Role string
	*toolwirev1.DelegatedCall
}

// callDelegation reads call callID's chain (of tenant) through the core
// as the viewer, so that the calls shown are those the viewer's key may
// see: its tenant's, and under per-agent visibility its agent's. nil for
// a call outside any chain, or when the chain could not be read (the
// page shows the rest).
func (s *Server) callDelegation(r *http.Request, v *viewer, tenant, callID string) *delegationView {
	id := v.ID
	id.Tenant = tenant
	dg, err := s.cfg.Core.GetDelegation(r.Context(), id, callID)
	if err != nil || (len(dg.GetAncestors()) == 0 && len(dg.GetChildren()) == 0 && dg.GetMoreChildren() == 0) {
		return nil
	}
	anc := slices.Clone(dg.GetAncestors())
	slices.Reverse(anc)
	dv := &delegationView{Children: dg.GetChildren(), More: dg.GetMoreChildren()}
	for i, c := range anc {
		role := "above"
		switch {
		case i == len(anc)-1:
			role = "parent"
		case i == 0:
			role = "root"
		}
		dv.Ancestors = append(dv.Ancestors, chainCall{Role: role, DelegatedCall: c})
	}
	return dv
}

// delegatedState is a chain call's state in words, as the calls list
// names outcomes.
func delegatedState(c *toolwirev1.DelegatedCall) string {
	switch c.GetState() {
	case toolwirev1.CallState_CALL_STATE_DONE:
		if c.GetOk() {
			return "ok"
		}
		return "error"
	case toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL:
		return "awaiting approval"
	case toolwirev1.CallState_CALL_STATE_PENDING:
		return "running"
	}
	return "unknown"
}
