package policystore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	s := policystore.NewStore(env.Bus, nil)
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
	s := policystore.NewStore(env.Bus, nil)
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
	s := policystore.NewStore(env.Bus, nil)
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

// A scope keeps the documents of its KeepDocuments latest versions; the
// history lists older applies, whose documents are pruned once written
// longer ago than the grace.
func TestOldDocumentsArePruned(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus, nil)
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
	for i, v := range versions {
		_, err = s.Get(t.Context(), scope, v)
		if i < len(versions)-policystore.KeepDocuments {
			require.ErrorIs(t, err, policystore.ErrUnknownVersion, "apply %d: pruned", i)
		} else {
			require.NoError(t, err, "apply %d: one of the latest %d", i, policystore.KeepDocuments)
		}
	}
	require.Equal(t, policystore.KeepDocuments, countKeys(t, env.Bus, "doc.tenant.acme.>"))
}

// countKeys counts the bucket's stored messages on keys matching filter:
// a pruned document leaves nothing behind.
func countKeys(t *testing.T, b *bus.Bus, filter string) int {
	t.Helper()
	st, err := b.JS.Stream(t.Context(), "KV_"+b.Policies.Bucket())
	require.NoError(t, err)
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter("$KV."+b.Policies.Bucket()+"."+filter))
	require.NoError(t, err)
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

// One tenant cannot fill the shared bucket: a document is stored as its
// key's only revision, however often its layout changes, and a scope
// holds at most ScopeQuotaBytes of documents; past it, applies are
// refused with ErrQuota until older documents can be pruned.
func TestOneTenantCannotFillTheBucket(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus, nil)
	ctx := t.Context()
	acme := tenant(t, "acme")

	for i := range 20 {
		a := apply(t, s, acme, fmt.Sprintf("# layout %d\n%s", i, denyAllDoc))
		require.Equal(t, i == 0, a.Changed)
	}
	require.Equal(t, 1, countKeys(t, env.Bus, "doc.tenant.acme.>"), "one revision per document")
	cur, err := s.Current(ctx, acme)
	require.NoError(t, err)
	require.Contains(t, string(cur.Source), "# layout 19")

	// Megabyte documents, each a new version: the fifth within the grace
	// would take the scope past its quota.
	big := func(i int) []byte {
		pad := strings.Repeat("x", policy.MaxDocumentBytes-200)
		return fmt.Appendf(nil, "# %s\ntenant:\n  rules:\n    - {id: r%d, effect: allow, tools: [t%d]}\n", pad, i, i)
	}
	n := 0
	for ; n < 10; n++ {
		_, err = s.Apply(ctx, acme, big(n), policystore.ApplyOptions{})
		if err != nil {
			break
		}
	}
	require.ErrorIs(t, err, policystore.ErrQuota)
	require.Contains(t, err.Error(), "retry")
	require.Equal(t, policystore.ScopeQuotaBytes/policy.MaxDocumentBytes, n, "documents of about a megabyte applied before the refusal")
	_, err = s.Apply(ctx, tenant(t, "beta"), big(0), policystore.ApplyOptions{})
	require.NoError(t, err, "another tenant is not affected")

	// Once the grace has passed, older documents are pruned and applies
	// go on.
	policystore.SetPruneGrace(s, 0)
	for i := n; i < n+3; i++ {
		_, err = s.Apply(ctx, acme, big(i), policystore.ApplyOptions{})
		require.NoError(t, err)
	}
}

// A full bucket refuses an apply with ErrQuota, and nothing changes.
func TestFullBucketRefusesApplies(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{PoliciesMaxBytes: 256 << 10})
	s := policystore.NewStore(env.Bus, nil)
	ctx := t.Context()
	doc := func(i int) []byte {
		pad := strings.Repeat("x", 100<<10)
		return fmt.Appendf(nil, "# %s\ntenant:\n  rules:\n    - {id: r%d, effect: allow, tools: [t%d]}\n", pad, i, i)
	}
	var err error
	i := 0
	for ; i < 10 && err == nil; i++ {
		_, err = s.Apply(ctx, tenant(t, fmt.Sprintf("t%d", i)), doc(i), policystore.ApplyOptions{})
	}
	require.ErrorIs(t, err, policystore.ErrQuota)
	require.Contains(t, err.Error(), "full")
	_, err = s.Current(ctx, tenant(t, fmt.Sprintf("t%d", i-1)))
	require.ErrorIs(t, err, policystore.ErrNoPolicy, "the refused apply put nothing in force")
}

// ctxWait is a bounded context for waits on replicas.
func ctxWait(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
