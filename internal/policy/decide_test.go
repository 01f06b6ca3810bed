package policy_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

var (
	effects  = []policy.Effect{policy.Allow, policy.Ask, policy.Deny}
	defaults = []policy.Effect{0, policy.Allow, policy.Ask, policy.Deny}
	t0       = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
)

// layerCase is one layer of a generated document: which of its rules
// match the call (a subset of allow, ask, deny) and its default.
type layerCase struct {
	matching [policy.Deny + 1]bool
	def      policy.Effect
}

func (l layerCase) String() string {
	var m []string
	for _, e := range effects {
		if l.matching[e] {
			m = append(m, e.String())
		}
	}
	return fmt.Sprintf("{rules %v, default %s}", m, l.def)
}

// verdict is the layer's own answer (DESIGN §6): ask when an ask rule
// matches, allow when an allow rule does, else its default.
func (l layerCase) verdict() policy.Effect {
	switch {
	case l.matching[policy.Ask]:
		return policy.Ask
	case l.matching[policy.Allow]:
		return policy.Allow
	}
	return l.def
}

func allLayerCases() []layerCase {
	var out []layerCase
	for mask := range 8 {
		for _, def := range defaults {
			var l layerCase
			for i, e := range effects {
				l.matching[e] = mask&(1<<i) != 0
			}
			l.def = def
			out = append(out, l)
		}
	}
	return out
}

// expected is the oracle: the semantics of DESIGN §6 written plainly.
func expected(tenant layerCase, agent *layerCase, requiresApproval, grantCovers bool) policy.Effect {
	if tenant.matching[policy.Deny] || (agent != nil && agent.matching[policy.Deny]) {
		return policy.Deny // deny wins, at any layer
	}
	out := tenant.verdict()
	if agent != nil {
		out = max(out, agent.verdict()) // the most restrictive layer
	}
	if requiresApproval {
		out = max(out, policy.Ask)
	}
	if out == 0 {
		out = policy.Allow // nothing says otherwise
	}
	if out == policy.Ask && grantCovers {
		out = policy.Allow
	}
	return out
}

// layerYAML writes a layer whose rules come in the order rnd picks: the
// matching ones (one per effect, each matching in another way: a tools
// glob, an args glob, a CEL condition) and decoys that never match.
func layerYAML(b *strings.Builder, indent, prefix string, l layerCase, rnd *rand.Rand) {
	rules := []string{
		fmt.Sprintf(`{id: %s-decoy-deny, effect: deny, tools: [other_tool, "fs_read*"]}`, prefix),
		fmt.Sprintf(`{id: %s-decoy-allow, effect: allow, tools: ["fs_*"], args: {path: "/elsewhere/**"}}`, prefix),
		fmt.Sprintf(`{id: %s-decoy-ask, effect: ask, tools: ["*"], when: "args.size > 1000"}`, prefix),
		fmt.Sprintf(`{id: %s-decoy-when, effect: deny, tools: ["*"], when: "caller.session == 'other'"}`, prefix),
	}
	if l.matching[policy.Deny] {
		rules = append(rules, fmt.Sprintf(`{id: %s-deny, effect: deny, tools: ["fs_*"], args: {path: "/data/**"}, reason: "%s denies"}`, prefix, prefix))
	}
	if l.matching[policy.Ask] {
		rules = append(rules, fmt.Sprintf(`{id: %s-ask, effect: ask, tools: [fs_write], when: "args.size > 10 && tool.annotations.destructive", reason: "%s asks"}`, prefix, prefix))
	}
	if l.matching[policy.Allow] {
		rules = append(rules, fmt.Sprintf(`{id: %s-allow, effect: allow, tools: ["*"], when: "caller.session == 'sess-1'"}`, prefix))
	}
	rnd.Shuffle(len(rules), func(i, j int) { rules[i], rules[j] = rules[j], rules[i] })
	if l.def != 0 {
		fmt.Fprintf(b, "%sdefault: %s\n", indent, l.def)
	}
	fmt.Fprintf(b, "%srules:\n", indent)
	for _, r := range rules {
		fmt.Fprintf(b, "%s  - %s\n", indent, r)
	}
}

func docFor(tenant layerCase, agent *layerCase, rnd *rand.Rand) string {
	var tb, ab strings.Builder
	tb.WriteString("tenant:\n")
	layerYAML(&tb, "  ", "t", tenant, rnd)
	ab.WriteString("agents:\n  someone-else:\n    default: deny\n")
	if agent != nil {
		ab.WriteString("  bot:\n")
		layerYAML(&ab, "    ", "a", *agent, rnd)
	}
	parts := []string{tb.String(), ab.String()}
	rnd.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return strings.Join(parts, "")
}

var (
	caller   = &toolwirev1.Caller{Tenant: "acme", Agent: "bot", Session: "sess-1", Scopes: []string{"tools"}}
	callArgs = mustArgs(`{"path": "/data/report.csv", "size": 100}`)
)

func mustArgs(s string) *policy.Args {
	a, err := policy.ParseArgs([]byte(s))
	if err != nil {
		panic(err)
	}
	return a
}

func spec(requiresApproval bool) *toolwirev1.ToolSpec {
	return &toolwirev1.ToolSpec{Name: "fs_write", Version: "sha256:v1", RequiresApproval: requiresApproval}
}

// grantCases: grants that cover the call (one per layer) and grants that
// do not (another session, another agent, expired, another tool).
var grantCases = []struct {
	name   string
	grant  *policy.Grant
	covers bool
}{
	{"no grant", nil, false},
	{"session grant", &policy.Grant{ID: "g-s", Layer: policy.LayerSession, Tenant: "acme", Agent: "bot", Session: "sess-1", Tool: "fs_*"}, true},
	{"agent grant", &policy.Grant{ID: "g-a", Layer: policy.LayerAgent, Tenant: "acme", Agent: "bot", Tool: "fs_write", Args: map[string]string{"path": "/data/**"}}, true},
	{"tenant grant", &policy.Grant{ID: "g-t", Layer: policy.LayerTenant, Tenant: "acme", Tool: "*", Expires: t0.Add(time.Minute)}, true},
	{"other session's grant", &policy.Grant{ID: "g-x", Layer: policy.LayerSession, Tenant: "acme", Session: "sess-2", Tool: "*"}, false},
	{"other agent's grant", &policy.Grant{ID: "g-y", Layer: policy.LayerAgent, Tenant: "acme", Agent: "other", Tool: "*"}, false},
	{"other tenant's grant", &policy.Grant{ID: "g-z", Layer: policy.LayerTenant, Tenant: "globex", Tool: "*"}, false},
	{"expired grant", &policy.Grant{ID: "g-e", Layer: policy.LayerTenant, Tenant: "acme", Tool: "*", Expires: t0}, false},
	{"grant for other args", &policy.Grant{ID: "g-p", Layer: policy.LayerTenant, Tenant: "acme", Tool: "*", Args: map[string]string{"path": "/tmp/**"}}, false},
	{"grant for another tool", &policy.Grant{ID: "g-o", Layer: policy.LayerTenant, Tenant: "acme", Tool: "fs_read"}, false},
}

// summary is what must not change when rules are reordered (line numbers
// and the version do).
func summary(d policy.Decision) string {
	var m []string
	for _, x := range d.Matched {
		m = append(m, fmt.Sprintf("%s/%s/%s", x.Layer, x.Effect, x.ID))
	}
	g := ""
	if d.Grant != nil {
		g = d.Grant.ID
	}
	return fmt.Sprintf("%s matched=%v default=%s requires=%t grant=%s rule=%s reason=%q errors=%d",
		d.Outcome, m, d.Default, d.RequiresApproval, g, d.RuleID(), d.Reason(), len(d.Errors))
}

// Every combination of layer × effect × default × grant (× requires
// approval, × agent layer present or not) decides as DESIGN §6 says, and
// shuffling the rules (and the layers in the file) changes nothing.
func TestDecideEveryCombination(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	cases := allLayerCases()
	agentCases := []*layerCase{nil}
	for i := range cases {
		agentCases = append(agentCases, &cases[i])
	}
	n := 0
	for _, tenant := range cases {
		for _, agent := range agentCases {
			var policies []*policy.Policy
			for range 3 {
				p, err := policy.Parse([]byte(docFor(tenant, agent, rnd)))
				require.NoError(t, err)
				policies = append(policies, p)
			}
			for _, ra := range []bool{false, true} {
				for _, gc := range grantCases {
					in := policy.Input{Tool: spec(ra), Args: callArgs, Caller: caller, Now: t0}
					if gc.grant != nil {
						in.Grants = policy.GrantList{*gc.grant}
					}
					want := expected(tenant, agent, ra, gc.covers)
					name := fmt.Sprintf("tenant %v, agent %v, requires_approval %t, %s", tenant, agent, ra, gc.name)
					first := policies[0].Decide(in)
					require.Equal(t, want, first.Outcome, name)
					checkDecision(t, name, first, tenant, agent)
					for _, p := range policies[1:] {
						require.Equal(t, summary(first), summary(p.Decide(in)), "%s: rule order changed the decision", name)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d combinations, each with 3 rule orders", n)
}

// checkDecision checks what a decision says it rests on.
func checkDecision(t *testing.T, name string, d policy.Decision, tenant layerCase, agent *layerCase) {
	t.Helper()
	require.Empty(t, d.Errors, name)
	require.True(t, slices.IsSortedFunc(d.Matched, func(a, b policy.Match) int {
		if a.Layer != b.Layer {
			return int(a.Layer) - int(b.Layer)
		}
		if a.Effect != b.Effect {
			return int(b.Effect) - int(a.Effect)
		}
		return strings.Compare(a.ID, b.ID)
	}), "%s: matched rules out of order: %v", name, summary(d))
	for _, m := range d.Matched {
		require.NotContains(t, m.ID, "decoy", name)
	}
	decided := d.Outcome
	if d.Grant != nil {
		decided = policy.Ask
		require.Equal(t, policy.Allow, d.Outcome, name)
	}
	if r := d.Rule(); r != nil {
		require.Equal(t, decided, r.Effect, name)
	}
	if decided == policy.Deny && (tenant.matching[policy.Deny] || (agent != nil && agent.matching[policy.Deny])) {
		for _, m := range d.Matched {
			require.Equal(t, policy.Deny, m.Effect, "%s: a deny lists the deny rules only", name)
		}
		require.Contains(t, d.Reason(), "denies", name)
	}
	if d.Default != 0 {
		l := tenant
		if d.Default == policy.LayerAgent {
			l = *agent
		}
		require.Equal(t, decided, l.def, name)
	}
}

// The sentences of DESIGN §6, one test each, in plain documents.
func TestDecideSemantics(t *testing.T) {
	t.Parallel()
	decide := func(doc string, tool *toolwirev1.ToolSpec, args string, grants ...policy.Grant) policy.Decision {
		t.Helper()
		p, err := policy.Parse([]byte(doc))
		require.NoError(t, err)
		return p.Decide(policy.Input{Tool: tool, Args: mustArgs(args), Caller: caller, Grants: policy.GrantList(grants), Now: t0})
	}
	write := spec(false)

	// A lower layer can never turn a deny into an allow: not a deny rule,
	// not a deny default.
	d := decide("tenant: {rules: [{id: no, effect: deny, tools: [fs_write]}]}\nagents: {bot: {rules: [{id: yes, effect: allow, tools: ['*']}]}}", write, `{}`)
	require.Equal(t, policy.Deny, d.Outcome)
	require.Equal(t, "no", d.RuleID())
	d = decide("tenant: {default: deny}\nagents: {bot: {rules: [{id: yes, effect: allow, tools: ['*']}]}}", write, `{}`)
	require.Equal(t, policy.Deny, d.Outcome)
	require.Equal(t, policy.LayerTenant, d.Default)
	require.Contains(t, d.Reason(), "default is deny")

	// A grant covers an ask, never a deny.
	g := policy.Grant{ID: "g", Layer: policy.LayerTenant, Tenant: "acme", Tool: "*"}
	d = decide("tenant: {rules: [{id: no, effect: deny, tools: [fs_write]}]}", write, `{}`, g)
	require.Equal(t, policy.Deny, d.Outcome)
	require.Nil(t, d.Grant)
	d = decide("tenant: {default: deny}", write, `{}`, g)
	require.Equal(t, policy.Deny, d.Outcome)
	d = decide("tenant: {default: ask}", write, `{}`, g)
	require.Equal(t, policy.Allow, d.Outcome)
	require.Equal(t, "g", d.Grant.ID)
	require.Equal(t, policy.LayerTenant, d.Default)
	require.True(t, d.Covered())

	// An allow rule overrides its own layer's ask default.
	d = decide("tenant: {default: ask, rules: [{id: ok, effect: allow, tools: [fs_write]}]}", write, `{}`)
	require.Equal(t, policy.Allow, d.Outcome)
	require.Equal(t, "ok", d.RuleID())
	require.Equal(t, `allowed by policy rule "ok"`, d.Reason())

	// requires_approval asks whatever the rules say; deny still wins.
	d = decide("tenant: {rules: [{id: ok, effect: allow, tools: [fs_write]}]}", spec(true), `{}`)
	require.Equal(t, policy.Ask, d.Outcome)
	require.True(t, d.RequiresApproval)
	require.Equal(t, "the tool requires approval", d.Reason())
	d = decide("tenant: {rules: [{id: no, effect: deny, tools: [fs_write]}]}", spec(true), `{}`)
	require.Equal(t, policy.Deny, d.Outcome)

	// An ask rule's reason is what the caller is told; a rule without a
	// reason is named by its id, never by its text.
	d = decide("tenant: {rules: [{id: big, effect: ask, tools: ['*'], args: {path: '/secret/**'}}]}", write, `{"path":"/secret/x"}`)
	require.Equal(t, policy.Ask, d.Outcome)
	require.Equal(t, `policy rule "big" asks for approval`, d.Reason())
	require.NotContains(t, d.Reason(), "secret")

	// Nothing says otherwise: allow.
	d = decide("tenant: {rules: [{id: x, effect: deny, tools: [other]}]}", write, `{}`)
	require.Equal(t, policy.Allow, d.Outcome)
	require.Empty(t, d.Matched)
	require.Equal(t, "", d.RuleID())

	// Several grants: the narrowest layer covers, whatever their order.
	gs := []policy.Grant{
		{ID: "t", Layer: policy.LayerTenant, Tenant: "acme", Tool: "*"},
		{ID: "s2", Layer: policy.LayerSession, Tenant: "acme", Session: "sess-1", Tool: "*"},
		{ID: "a", Layer: policy.LayerAgent, Tenant: "acme", Agent: "bot", Tool: "*"},
		{ID: "s1", Layer: policy.LayerSession, Tenant: "acme", Session: "sess-1", Tool: "fs_*"},
	}
	for range 5 {
		rand.Shuffle(len(gs), func(i, j int) { gs[i], gs[j] = gs[j], gs[i] })
		d = decide("tenant: {default: ask}", write, `{}`, gs...)
		require.Equal(t, "s1", d.Grant.ID)
	}
}

// With no policy at all every call is allowed (today's behaviour), but a
// tool that requires approval asks, and an approval or grant covers it.
func TestDecideNoPolicy(t *testing.T) {
	t.Parallel()
	var p *policy.Policy
	d := p.Decide(policy.Input{Tool: spec(false), Args: callArgs, Caller: caller})
	require.Equal(t, policy.Allow, d.Outcome)
	require.Equal(t, "", d.Version)
	require.Equal(t, "no policy is in force", d.Reason())
	require.False(t, p.Hidden("fs_write", caller))
	require.NoError(t, p.RunTests(nil))

	d = p.Decide(policy.Input{Tool: spec(true), Args: callArgs, Caller: caller})
	require.Equal(t, policy.Ask, d.Outcome)
	require.Equal(t, "the tool requires approval", d.Reason())

	a := approvalFor(spec(true), caller, callArgs)
	d = p.Decide(policy.Input{Tool: spec(true), Args: callArgs, Caller: caller, Approval: a, Now: t0})
	require.Equal(t, policy.Allow, d.Outcome)
	require.Equal(t, "apr-1", d.Approval.ID)

	// Nil args and caller are {} and an empty caller.
	d = p.Decide(policy.Input{Tool: spec(false)})
	require.Equal(t, policy.Allow, d.Outcome)
}

func approvalFor(tool *toolwirev1.ToolSpec, c *toolwirev1.Caller, args *policy.Args) *policy.Approval {
	return &policy.Approval{
		ID: "apr-1", Tenant: c.GetTenant(), Agent: c.GetAgent(), Session: c.GetSession(),
		Tool: tool.GetName(), SpecVersion: tool.GetVersion(), ArgsSHA256: args.Hash(),
		Expires: t0.Add(time.Hour), Approver: "alice", Nonce: "n-1",
	}
}

// An approval covers exactly the call it was made for: one changed byte
// of the arguments, another spec version, caller or an expired approval
// is refused; reordered keys or re-spelled numbers are the same call.
func TestApprovalBinding(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte("tenant: {default: ask}"))
	require.NoError(t, err)
	tool := spec(false)
	a := approvalFor(tool, caller, callArgs)
	decide := func(tool *toolwirev1.ToolSpec, c *toolwirev1.Caller, args string, now time.Time) policy.Decision {
		return p.Decide(policy.Input{Tool: tool, Args: mustArgs(args), Caller: c, Approval: a, Now: now})
	}
	d := decide(tool, caller, `{"size":100.0,"path":"/data/report.csv"}`, t0)
	require.Equal(t, policy.Allow, d.Outcome, d.ApprovalError)
	require.Equal(t, "apr-1", d.Approval.ID)
	require.Empty(t, d.ApprovalError)

	other := func(mod func(c *toolwirev1.Caller)) *toolwirev1.Caller {
		c := &toolwirev1.Caller{Tenant: caller.Tenant, Agent: caller.Agent, Session: caller.Session}
		mod(c)
		return c
	}
	for _, tc := range []struct {
		name string
		d    policy.Decision
		want string
	}{
		{"one byte of the arguments", decide(tool, caller, `{"path":"/data/report.csw","size":100}`, t0), "other arguments"},
		{"another number", decide(tool, caller, `{"path":"/data/report.csv","size":100.5}`, t0), "other arguments"},
		{"another spec version", decide(&toolwirev1.ToolSpec{Name: "fs_write", Version: "sha256:v2"}, caller, `{"path":"/data/report.csv","size":100}`, t0), "spec version"},
		{"another tool", decide(&toolwirev1.ToolSpec{Name: "fs_read", Version: "sha256:v1"}, caller, `{"path":"/data/report.csv","size":100}`, t0), "tool"},
		{"another session", decide(tool, other(func(c *toolwirev1.Caller) { c.Session = "sess-2" }), `{"path":"/data/report.csv","size":100}`, t0), "session"},
		{"another agent", decide(tool, other(func(c *toolwirev1.Caller) { c.Agent = "eve" }), `{"path":"/data/report.csv","size":100}`, t0), "agent"},
		{"another tenant", decide(tool, other(func(c *toolwirev1.Caller) { c.Tenant = "globex" }), `{"path":"/data/report.csv","size":100}`, t0), "tenant"},
		{"expired", decide(tool, caller, `{"path":"/data/report.csv","size":100}`, t0.Add(time.Hour)), "expired"},
	} {
		require.Equal(t, policy.Ask, tc.d.Outcome, tc.name)
		require.Nil(t, tc.d.Approval, tc.name)
		require.Contains(t, tc.d.ApprovalError, tc.want, tc.name)
	}

	// An approval never covers a deny.
	pd, err := policy.Parse([]byte("tenant: {default: deny}"))
	require.NoError(t, err)
	d = pd.Decide(policy.Input{Tool: tool, Args: callArgs, Caller: caller, Approval: a, Now: t0})
	require.Equal(t, policy.Deny, d.Outcome)
	require.Nil(t, d.Approval)

	// The worker's re-check on a published call.
	call := &toolwirev1.ToolCall{Tool: "fs_write", SpecVersion: "sha256:v1", Caller: caller, Arguments: []byte(`{"size":1e2,"path":"/data/report.csv"}`)}
	require.NoError(t, a.CheckCall(call, t0))
	call.Arguments = []byte(`{"size":1e2,"path":"/data/report.csv","extra":true}`)
	require.ErrorIs(t, a.CheckCall(call, t0), policy.ErrApprovalMismatch)
	call.Arguments = []byte(`{"size":1,"size":2}`)
	require.ErrorIs(t, a.CheckCall(call, t0), policy.ErrApprovalMismatch)
	call.Arguments = []byte(`{"size":1e2,"path":"/data/report.csv"}`)
	require.ErrorIs(t, a.CheckCall(call, t0.Add(2*time.Hour)), policy.ErrApprovalExpired)
	noExpiry := *a
	noExpiry.Expires = time.Time{}
	require.ErrorIs(t, noExpiry.CheckCall(call, t0), policy.ErrApprovalExpired)
}

func TestGrantValidate(t *testing.T) {
	t.Parallel()
	for _, g := range []policy.Grant{
		{Layer: policy.LayerSession, Tenant: "acme", Session: "s", Tool: "*"},
		{Layer: policy.LayerAgent, Tenant: "acme", Agent: "bot", Tool: "fs_*", Args: map[string]string{"repo.owner": "acme-*"}},
		{Layer: policy.LayerTenant, Tenant: "acme", Tool: "x"},
	} {
		require.NoError(t, g.Validate())
	}
	for _, g := range []policy.Grant{
		{Layer: policy.LayerSession, Tool: "*"},
		{Layer: policy.LayerSession, Tenant: "acme", Tool: "*"},
		{Layer: policy.LayerAgent, Tenant: "acme", Tool: "*"},
		{Tenant: "acme", Tool: "*"},
		{Layer: policy.LayerTenant, Tenant: "acme", Tool: "["},
		{Layer: policy.LayerTenant, Tenant: "acme", Tool: ""},
		{Layer: policy.LayerTenant, Tenant: "acme", Tool: "*", Args: map[string]string{"a..b": "x"}},
	} {
		require.ErrorIs(t, g.Validate(), policy.ErrBadGrant, "%+v", g)
		require.False(t, g.Covers(spec(false), caller, callArgs, t0), "%+v", g)
	}
}

// ListTools hides a tool only when an applicable layer denies it
// whatever the arguments.
func TestHidden(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte(`tenant:
  rules:
    - {id: no-shell, effect: deny, tools: ["shell*"]}
    - {id: no-etc, effect: deny, tools: [fs_read], args: {path: "/etc/**"}}
    - {id: no-prod, effect: deny, tools: [deploy], when: "caller.session == 'prod'"}
agents:
  bot:
    default: deny
    rules:
      - {id: bot-read, effect: allow, tools: [fs_read], args: {path: "/data/**"}}
      - {id: bot-ask, effect: ask, tools: [deploy]}
  helper:
    rules:
      - {id: helper-no-deploy, effect: deny, tools: [deploy]}
`))
	require.NoError(t, err)
	other := &toolwirev1.Caller{Tenant: "acme", Agent: "other"}
	helper := &toolwirev1.Caller{Tenant: "acme", Agent: "helper"}
	for _, tc := range []struct {
		tool   string
		caller *toolwirev1.Caller
		hidden bool
	}{
		{"shell_exec", other, true},
		{"shell_exec", caller, true},
		{"fs_read", other, false},  // denied for some arguments only
		{"deploy", other, false},   // denied under a condition only
		{"fs_read", caller, false}, // bot's default deny, but a bot rule names it
		{"deploy", caller, false},
		{"fs_write", caller, true}, // bot's default deny, and no bot rule names it
		{"fs_write", other, false},
		{"deploy", helper, true},
		{"fs_write", nil, false},
	} {
		require.Equal(t, tc.hidden, p.Hidden(tc.tool, tc.caller), "%s for %s", tc.tool, tc.caller.GetAgent())
	}
}

// Decide is safe for concurrent use (the candidates cache is shared).
func TestDecideConcurrent(t *testing.T) {
	t.Parallel()
	p := benchPolicy(t)
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 300 {
				tool := &toolwirev1.ToolSpec{Name: fmt.Sprintf("tool_%d", (i*7+w)%60)}
				d := p.Decide(policy.Input{Tool: tool, Args: callArgs, Caller: caller})
				if d.Outcome == 0 {
					panic("no outcome")
				}
				p.Hidden(tool.Name, caller)
			}
		}()
	}
	for range 4 {
		<-done
	}
}
