package toolctl_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/toolctl"
)

// get shows a call's place in its delegation chain: the child its parent
// (on stderr, after the result), the parent its children (--tree, and
// -o json); another tenant's call stays a made-up id (issue 31).
func TestGetShowsDelegationChain(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: tenantKeys})
	as := func(key string, args ...string) string {
		t.Helper()
		o := b.policyAs(t, key, args...)
		require.Equal(t, toolctl.ExitOK, o.code, "%v: %s", args, o.stderr)
		return strings.TrimSpace(o.stdout)
	}
	parent := as("acme-bot", "submit", "sleep", `{"duration":"30s"}`)
	t.Cleanup(func() { b.policyAs(t, "acme-bot", "cancel", parent) })
	child := as("acme-bot", "submit", "sleep", `{"duration":"30s"}`, "--parent", parent)
	grandchild := as("acme-bot", "submit", "echo", `{"text":"deep"}`, "--parent", child)

	o := b.policyAs(t, "acme-bot", "get", grandchild, "--wait", "30s")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Equal(t, "deep\n", o.stdout, "the result alone on stdout")
	require.Contains(t, o.stderr, "delegation:\n  root     "+parent+" sleep running\n  parent   "+child+" sleep running\n")
	require.Contains(t, o.stderr, "  this     "+grandchild+"\n")
	for _, l := range strings.Split(strings.TrimSuffix(o.stderr, "\n"), "\n") {
		require.Regexp(t, chainLine, l, "the shape docs/delegation.md shows")
	}

	o = b.policyAs(t, "acme-bot", "get", parent, "--tree")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Equal(t, "delegation:\n  this     "+parent+"\n  child    "+child+" sleep running\n", o.stdout)

	o = b.policyAs(t, "acme-bot", "get", child, "--tree")
	require.Equal(t, "delegation:\n  parent   "+parent+" sleep running\n  this     "+child+"\n  child    "+grandchild+" echo ok\n", o.stdout)

	js := as("acme-bot", "-o", "json", "get", child, "--tree")
	var dg struct {
		Ancestors []struct{ CallID, Tool, State string } `json:"ancestors"`
		Children  []struct{ CallID, Tool string }        `json:"children"`
	}
	require.NoError(t, json.Unmarshal([]byte(js), &dg), js)
	require.Len(t, dg.Ancestors, 1, js)
	require.Equal(t, parent, dg.Ancestors[0].CallID)
	require.Equal(t, "CALL_STATE_PENDING", dg.Ancestors[0].State)
	require.Len(t, dg.Children, 1, js)
	require.Equal(t, grandchild, dg.Children[0].CallID)

	tree := func(id string) string {
		o := b.policyAs(t, "beta-admin", "get", id, "--tree")
		return string(rune('0'+o.code)) + " " + strings.ReplaceAll(o.stdout+o.stderr, id, "ID")
	}
	madeUp := tree(ulid.Make().String())
	require.NotEqual(t, "0 ", madeUp[:2], madeUp)
	require.Equal(t, madeUp, tree(parent), "another tenant's chain is a made-up id")
	o = b.policyAs(t, "beta-admin", "get", parent)
	require.NotContains(t, o.stdout+o.stderr, "delegation", "no chain for another tenant's call")
}

// A call with more children than GetDelegation describes prints the
// oldest 20, one line each, then how many more there are (get --tree,
// and plain get after the result); -o json has them as more_children.
func TestGetTreeCountsTheChildrenNotShown(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: tenantKeys})
	as := func(args ...string) string {
		t.Helper()
		o := b.policyAs(t, "acme-bot", args...)
		require.Equal(t, toolctl.ExitOK, o.code, "%v: %s", args, o.stderr)
		return strings.TrimSpace(o.stdout)
	}
	parent := as("submit", "sleep", `{"duration":"30s"}`)
	t.Cleanup(func() { b.policyAs(t, "acme-bot", "cancel", parent) })
	const shown, more = dispatch.MaxDelegationChildrenShown, 2
	var kids []string
	for range shown + more {
		kids = append(kids, as("submit", "echo", `{"text":"hi"}`, "--parent", parent))
	}
	slices.Sort(kids) // oldest first, as ULIDs sort

	o := b.policyAs(t, "acme-bot", "get", parent, "--tree")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	lines := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
	require.Len(t, lines, 2+shown+1, o.stdout)
	require.Equal(t, []string{"delegation:", "  this     " + parent}, lines[:2])
	for i, l := range lines[2 : 2+shown] {
		require.Regexp(t, `^  child    `+kids[i]+` echo (ok|running)$`, l)
	}
	require.Equal(t, "  and 2 more children", lines[len(lines)-1])
	for _, l := range lines {
		require.Regexp(t, chainLine, l, "the shape docs/delegation.md shows")
	}

	var dg struct {
		Children     []struct{ CallID string } `json:"children"`
		MoreChildren int                       `json:"moreChildren"`
	}
	js := as("-o", "json", "get", parent, "--tree")
	require.NoError(t, json.Unmarshal([]byte(js), &dg), js)
	require.Len(t, dg.Children, shown, js)
	require.Equal(t, more, dg.MoreChildren, js)

	child := kids[0]
	o = b.policyAs(t, "acme-bot", "get", child, "--wait", "30s")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stderr, "  parent   "+parent+" sleep running\n  this     "+child+"\n")
	require.NotContains(t, o.stderr, "more children", "a child has none")
}

// chainLine is the shape of each line get prints about a chain.
var chainLine = regexp.MustCompile(`^(delegation:|  (root|ancestor|parent|child) +\S+ \S+ \S+|  this +\S+|  and \d+ more children)$`)

// The chain docs/delegation.md shows ("Seeing a chain") is in the shape
// get prints: every line of its example is one get prints.
func TestDocsDelegationChainExample(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../docs/delegation.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```\n\\$ toolctl get \\S+\n(.*?)```").FindSubmatch(src)
	require.NotNil(t, m, "the example of toolctl get")
	lines := strings.Split(strings.TrimSuffix(string(m[1]), "\n"), "\n")
	i := slices.Index(lines, "delegation:")
	require.Positive(t, i, "the result, then the chain")
	for _, l := range lines[i:] {
		require.Regexp(t, chainLine, l)
	}
}
