package policyops_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policyops"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// specs knows echo and remember.
type specs struct{}

func (specs) Get(name string) (*registry.Entry, error) {
	if name != "echo" && name != "remember" {
		return nil, registry.ErrNotFound
	}
	return &registry.Entry{Spec: &toolwirev1.ToolSpec{Name: name, Version: "v1"}}, nil
}

func (s specs) GetVersion(_ context.Context, name, _ string) (*registry.Entry, error) {
	return s.Get(name)
}

// noApprovals finds no approval.
type noApprovals struct{}

func (noApprovals) Record(_ context.Context, _, id string) (*approvals.Record, error) {
	return nil, fmt.Errorf("%w: %q", approvals.ErrNotFound, id)
}

type bundle struct {
	ops   *policyops.Ops
	store *policystore.Store
}

// setup runs Ops over a real JetStream's policies bucket, with a holder
// of the documents in force as its policy source.
func setup(t *testing.T) *bundle {
	t.Helper()
	env := bustest.Start(t, bus.Config{})
	h := policystore.NewHolder(env.Bus, nil)
	require.NoError(t, h.Start(t.Context()))
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	store := policystore.NewStore(env.Bus, nil)
	ops, err := policyops.New(policyops.Config{Documents: store, Policies: h, Specs: specs{}, Approvals: noApprovals{}})
	require.NoError(t, err)
	return &bundle{ops: ops, store: store}
}

var (
	root = identity.Identity{Tenant: "acme", Agent: "root", Scopes: []string{identity.AdminScope}}
	bot  = identity.Identity{Tenant: "acme", Agent: "bot"}
)

const doc = `tenant:
  default: allow
  rules:
    - id: no-secrets
      effect: deny
      tools: [echo]
      args: {text: "secret*"}
      reason: secrets stay home
tests:
  - tool: echo
    args: {text: hi}
    expect: allow
`

// Every operation needs the admin scope and says what needed it.
func TestEveryOperationNeedsTheAdminScope(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := t.Context()
	_, err := s.ops.Apply(ctx, bot, policyops.ApplyRequest{Document: []byte(doc)})
	require.ErrorIs(t, err, policyops.ErrNotAdmin)
	require.EqualError(t, err, `applying a policy needs the "admin" scope`)
	_, err = s.ops.Remove(ctx, bot)
	require.ErrorIs(t, err, policyops.ErrNotAdmin)
	_, err = s.ops.Document(ctx, bot, "")
	require.ErrorIs(t, err, policyops.ErrNotAdmin)
	_, err = s.ops.Versions(ctx, bot, 0)
	require.ErrorIs(t, err, policyops.ErrNotAdmin)
	_, err = s.ops.Explain(ctx, bot, policyops.ExplainRequest{Tool: "echo"})
	require.ErrorIs(t, err, policyops.ErrNotAdmin)
}

// Apply stores a document and answers once it is in force here; Document
// and Versions show it; Remove falls back to the installation document.
func TestApplyShowRemove(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := t.Context()
	none, err := s.ops.Document(ctx, root, "")
	require.NoError(t, err)
	require.Nil(t, none, "no document anywhere")

	inst, err := s.store.Apply(ctx, policystore.Installation, []byte("tenant: {default: deny}\n"), policystore.ApplyOptions{})
	require.NoError(t, err)
	a, err := s.ops.Apply(ctx, root, policyops.ApplyRequest{Document: []byte(doc), Comment: "first"})
	require.NoError(t, err)
	require.True(t, a.Changed)
	require.True(t, a.InForce)
	require.Equal(t, 1, a.TestsPassed)

	got, err := s.ops.Document(ctx, root, "")
	require.NoError(t, err)
	require.Equal(t, doc, string(got.Source), "as applied")
	vs, err := s.ops.Versions(ctx, root, 0)
	require.NoError(t, err)
	require.Len(t, vs, 1)
	require.Equal(t, "first", vs[0].Comment)
	require.Equal(t, "root", vs[0].AppliedBy)

	dry, err := s.ops.Apply(ctx, root, policyops.ApplyRequest{Document: []byte("tenant: {default: deny}\n"), DryRun: true})
	require.NoError(t, err)
	require.True(t, dry.Changed)
	require.False(t, dry.InForce, "a dry run puts nothing in force")

	rm, err := s.ops.Remove(ctx, root)
	require.NoError(t, err)
	require.True(t, rm.Removed)
	require.Equal(t, inst.Version.Version, rm.InForce.Version)
	got, err = s.ops.Document(ctx, root, "")
	require.NoError(t, err)
	require.True(t, got.Version.Scope.IsInstallation())
	old, err := s.ops.Document(ctx, root, a.Version.Version)
	require.NoError(t, err)
	require.Equal(t, doc, string(old.Source), "a stored version stays readable")
}

// A refused document or request says why with the kind the API maps.
func TestApplyRefusals(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := t.Context()
	failing := strings.Replace(doc, "expect: allow", "expect: deny", 1)
	_, err := s.ops.Apply(ctx, root, policyops.ApplyRequest{Document: []byte(failing)})
	require.ErrorIs(t, err, policy.ErrTestsFailed)
	_, err = s.ops.Apply(ctx, root, policyops.ApplyRequest{Document: make([]byte, policy.MaxDocumentBytes+1)})
	require.ErrorIs(t, err, policyops.ErrBadRequest)
	require.ErrorContains(t, err, "at most 1048576")

	unenforced, err := policyops.New(policyops.Config{Documents: s.store, Specs: specs{}, Approvals: noApprovals{}})
	require.NoError(t, err)
	_, err = unenforced.Apply(ctx, root, policyops.ApplyRequest{Document: []byte(doc)})
	require.ErrorIs(t, err, policyops.ErrNoPolicySource)
	_, err = unenforced.Remove(ctx, root)
	require.ErrorIs(t, err, policyops.ErrNoPolicySource)
}

// Explain decides as admission would, with the policy in force or a
// stored version, and says why; bad requests are refused by kind.
func TestExplain(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := t.Context()
	x, err := s.ops.Explain(ctx, root, policyops.ExplainRequest{Tool: "echo", Arguments: []byte(`{"text":"secret"}`)})
	require.NoError(t, err)
	require.Equal(t, policy.Allow, x.Decision.Outcome, "no policy")

	a, err := s.ops.Apply(ctx, root, policyops.ApplyRequest{Document: []byte(doc)})
	require.NoError(t, err)
	_, err = s.ops.Apply(ctx, root, policyops.ApplyRequest{Document: []byte("tenant: {default: deny}\n")})
	require.NoError(t, err)
	x, err = s.ops.Explain(ctx, root, policyops.ExplainRequest{Tool: "echo", Arguments: []byte(`{"text":"hi"}`)})
	require.NoError(t, err)
	require.Equal(t, policy.Deny, x.Decision.Outcome, "the version in force")
	x, err = s.ops.Explain(ctx, root, policyops.ExplainRequest{Tool: "echo", Arguments: []byte(`{"text":"secret x"}`),
		PolicyVersion: a.Version.Version, ApprovalID: "nope"})
	require.NoError(t, err)
	require.Equal(t, policy.Deny, x.Decision.Outcome)
	require.Equal(t, "no-secrets", x.Decision.RuleID())
	require.NotEmpty(t, x.ApprovalError, "an approval that cannot be found binds nothing")

	_, err = s.ops.Explain(ctx, root, policyops.ExplainRequest{})
	require.ErrorIs(t, err, policyops.ErrBadRequest)
	_, err = s.ops.Explain(ctx, root, policyops.ExplainRequest{Tool: "echo", Arguments: []byte(`{"a":1,"a":2}`)})
	require.ErrorIs(t, err, policyops.ErrBadRequest)
	require.ErrorContains(t, err, "VALIDATION: arguments_json")
	_, err = s.ops.Explain(ctx, root, policyops.ExplainRequest{Tool: "nope"})
	require.ErrorIs(t, err, registry.ErrNotFound)
	_, err = s.ops.Explain(ctx, root, policyops.ExplainRequest{Tool: "echo", PolicyVersion: "sha256:" + strings.Repeat("0", 64)})
	require.ErrorIs(t, err, policystore.ErrUnknownVersion)
}

// Explain decides as if the session were in the request's mode: the
// mode's layer applies and is named; a mode the policy does not declare
// is a bad request (admission would refuse every call in it).
func TestExplainInMode(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := t.Context()
	_, err := s.ops.Apply(ctx, root, policyops.ApplyRequest{Document: []byte(
		"tenant: {default: allow}\nmodes:\n  voice:\n    rules:\n      - {id: voice-quiet, effect: deny, tools: [echo], reason: no echo on a call}\n")})
	require.NoError(t, err)
	x, err := s.ops.Explain(ctx, root, policyops.ExplainRequest{Tool: "echo", Mode: "voice"})
	require.NoError(t, err)
	require.Equal(t, policy.Deny, x.Decision.Outcome)
	require.Equal(t, "voice-quiet", x.Decision.RuleID())
	mode, rule, ok := x.Decision.ModeRestricted()
	require.True(t, ok)
	require.Equal(t, []string{"voice", "voice-quiet"}, []string{mode, rule})
	require.Contains(t, x.Layers, "mode voice (no default)")

	x, err = s.ops.Explain(ctx, root, policyops.ExplainRequest{Tool: "echo"})
	require.NoError(t, err)
	require.Equal(t, policy.Allow, x.Decision.Outcome, "without the mode")

	_, err = s.ops.Explain(ctx, root, policyops.ExplainRequest{Tool: "echo", Mode: "shout"})
	require.ErrorIs(t, err, policyops.ErrBadRequest)
	require.ErrorContains(t, err, `mode "shout"`)
}
