package policystore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// denyEtc denies fs_* on /etc and allows the rest; its tests pass.
const denyEtc = `# the operator's rules
tenant:
  default: allow
  rules:
    - id: no-etc
      effect: deny
      tools: [fs_*]
      args: {path: "/etc/**"}
      reason: system files are off limits
tests:
  - tool: fs_read
    args: {path: /etc/passwd}
    expect: deny
  - tool: fs_read
    args: {path: /tmp/x}
    expect: allow
`

// denyAllDoc denies every tool.
const denyAllDoc = `tenant:
  default: deny
`

func tenant(t *testing.T, name string) policystore.Scope {
	t.Helper()
	s, err := policystore.TenantScope(name)
	require.NoError(t, err)
	return s
}

func apply(t *testing.T, s *policystore.Store, scope policystore.Scope, src string) *policystore.Applied {
	t.Helper()
	a, err := s.Apply(t.Context(), scope, []byte(src), policystore.ApplyOptions{AppliedBy: "test"})
	require.NoError(t, err)
	return a
}

// Apply refuses a document whose CEL does not compile, or whose own tests
// fail, naming the line; nothing is stored.
func TestApplyRefusesNamingTheLine(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus.Policies, nil)
	scope := tenant(t, "acme")

	badCEL := "tenant:\n  rules:\n    - id: bad\n      effect: deny\n      tools: [\"*\"]\n      when: args.x ==\n"
	_, err := s.Apply(t.Context(), scope, []byte(badCEL), policystore.ApplyOptions{})
	require.ErrorIs(t, err, policy.ErrInvalid)
	require.Contains(t, err.Error(), "line 6: tenant.rules[0].when")

	failing := strings.Replace(denyEtc, "args: {path: /tmp/x}\n    expect: allow", "args: {path: /tmp/x}\n    expect: deny", 1)
	_, err = s.Apply(t.Context(), scope, []byte(failing), policystore.ApplyOptions{})
	require.ErrorIs(t, err, policy.ErrTestsFailed)
	require.Contains(t, err.Error(), "line 14: tests[1]")
	require.Contains(t, err.Error(), "expected deny, got allow")

	// Tests see the registry's spec through Lookup: a read-only tool.
	readOnly := "tenant:\n  rules:\n    - id: no-writes\n      effect: deny\n      tools: [\"*\"]\n      when: tool.annotations.destructive\ntests:\n  - tool: lookup\n    expect: allow\n"
	_, err = s.Apply(t.Context(), scope, []byte(readOnly), policystore.ApplyOptions{})
	require.ErrorIs(t, err, policy.ErrTestsFailed, "a bare spec is destructive (MCP's default)")
	lookup := func(name string) *toolwirev1.ToolSpec {
		return &toolwirev1.ToolSpec{Name: name, Annotations: &toolwirev1.ToolAnnotations{ReadOnly: proto.Bool(true)}}
	}
	a, err := s.Apply(t.Context(), scope, []byte(readOnly), policystore.ApplyOptions{Lookup: lookup, DryRun: true})
	require.NoError(t, err)
	require.True(t, a.Changed)
	require.Equal(t, 1, a.TestsPassed)

	_, err = s.Current(t.Context(), scope)
	require.ErrorIs(t, err, policystore.ErrNoPolicy, "refusals and dry runs store nothing")

	big := "# " + strings.Repeat("x", policy.MaxDocumentBytes) + "\n" + denyAllDoc
	_, err = s.Apply(t.Context(), scope, []byte(big), policystore.ApplyOptions{})
	require.ErrorIs(t, err, policy.ErrInvalid)

	_, err = s.Apply(t.Context(), scope, []byte(denyAllDoc), policystore.ApplyOptions{Comment: strings.Repeat("c", policystore.MaxCommentBytes+1)})
	require.ErrorIs(t, err, policystore.ErrBadComment)
	_, err = s.Apply(t.Context(), policystore.Scope{}, []byte(denyAllDoc), policystore.ApplyOptions{})
	require.ErrorIs(t, err, policystore.ErrBadScope)
}

// Apply, Current, Get and History: versions by content hash, the newest
// first, an unchanged document recorded once, comments kept for show.
func TestApplyShowHistory(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus.Policies, nil)
	scope := tenant(t, "acme")
	ctx := t.Context()

	first, err := s.Apply(ctx, scope, []byte(denyEtc), policystore.ApplyOptions{AppliedBy: "alice", Comment: "first"})
	require.NoError(t, err)
	require.True(t, first.Changed)
	require.Equal(t, 2, first.TestsPassed)
	require.Equal(t, first.Policy.Version(), first.Version.Version)
	require.Equal(t, "acme", first.Version.Scope.Tenant())
	require.Equal(t, 1, first.Version.Rules)
	require.False(t, first.Version.AppliedAt.IsZero())

	second := apply(t, s, scope, denyAllDoc)
	require.True(t, second.Changed)

	// The same rules with other comments: nothing new in force, the
	// source updated for show.
	again, err := s.Apply(ctx, scope, []byte("# still deny\n"+denyAllDoc), policystore.ApplyOptions{AppliedBy: "bob"})
	require.NoError(t, err)
	require.False(t, again.Changed)
	require.Equal(t, second.Version.Version, again.Version.Version)
	require.Equal(t, "test", again.Version.AppliedBy, "the record in force, not a new one")

	cur, err := s.Current(ctx, scope)
	require.NoError(t, err)
	require.Equal(t, second.Version.Version, cur.Version.Version)
	require.Equal(t, "# still deny\n"+denyAllDoc, string(cur.Source))

	hist, err := s.History(ctx, scope, 0)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.Equal(t, second.Version.Version, hist[0].Version, "newest first")
	require.Equal(t, first.Version.Version, hist[1].Version)
	require.Equal(t, "alice", hist[1].AppliedBy)
	require.Equal(t, "first", hist[1].Comment)
	one, err := s.History(ctx, scope, 1)
	require.NoError(t, err)
	require.Len(t, one, 1)

	old, err := s.Get(ctx, scope, first.Version.Version)
	require.NoError(t, err)
	require.Equal(t, denyEtc, string(old.Source), "comments kept")
	require.Equal(t, "alice", old.Version.AppliedBy)
	_, err = s.Get(ctx, scope, "sha256:"+strings.Repeat("0", 64))
	require.ErrorIs(t, err, policystore.ErrUnknownVersion)
	_, err = s.Get(ctx, scope, "../../x")
	require.ErrorIs(t, err, policystore.ErrUnknownVersion)

	// Back to an earlier version: a new apply, a new history entry.
	back := apply(t, s, scope, denyEtc)
	require.True(t, back.Changed)
	hist, err = s.History(ctx, scope, 0)
	require.NoError(t, err)
	require.Len(t, hist, 3)
}

// Scopes never share keys: a tenant called "_all" or "install" is a
// tenant like any other, and the installation document is its own.
func TestScopesAreIsolated(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus.Policies, nil)
	ctx := t.Context()
	inst := apply(t, s, policystore.Installation, denyEtc)
	for _, name := range []string{"_all", "install", "tenant", "current", "doc"} {
		sc := tenant(t, name)
		_, err := s.Current(ctx, sc)
		require.ErrorIs(t, err, policystore.ErrNoPolicy, name)
		apply(t, s, sc, denyAllDoc)
		_, err = s.Get(ctx, sc, inst.Version.Version)
		require.ErrorIs(t, err, policystore.ErrUnknownVersion, "%s cannot read the installation's document by version", name)
	}
	cur, err := s.Current(ctx, policystore.Installation)
	require.NoError(t, err)
	require.Equal(t, inst.Version.Version, cur.Version.Version)
	require.Equal(t, "*", cur.Version.Scope.Tenant())

	for _, bad := range []string{"", "a.b", "*", "a>", "zoë", strings.Repeat("a", 65)} {
		_, err := policystore.TenantScope(bad)
		require.ErrorIs(t, err, policystore.ErrBadScope, bad)
	}
}

// Documents no history entry names are purged, after a grace, once a
// scope has more than the history holds.
func TestOldDocumentsArePruned(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus.Policies, nil)
	scope := tenant(t, "acme")
	policystore.SetPruneGrace(s, 0)
	var versions []string
	for i := range policystore.HistoryDepth + 6 {
		a := apply(t, s, scope, fmt.Sprintf("tenant:\n  rules:\n    - id: r%d\n      effect: allow\n      tools: [t%d]\n", i, i))
		versions = append(versions, a.Version.Version)
	}
	hist, err := s.History(t.Context(), scope, 0)
	require.NoError(t, err)
	require.Len(t, hist, policystore.HistoryDepth)
	require.Equal(t, versions[len(versions)-1], hist[0].Version)
	_, err = s.Get(t.Context(), scope, versions[0])
	require.ErrorIs(t, err, policystore.ErrUnknownVersion, "the oldest document left the history and was purged")
	_, err = s.Get(t.Context(), scope, versions[len(versions)-policystore.HistoryDepth])
	require.NoError(t, err, "every document the history names is kept")
}

// ctxWait is a bounded context for waits on replicas.
func ctxWait(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
