package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

// requireNothingQueued asserts that no call reached the calls stream
// (as internal/dispatch's admission tests do).
func requireNothingQueued(t *testing.T, s *dispatchtest.Stack) {
	t.Helper()
	info, err := s.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "a refused call reached the calls stream")
}

// policyIdentities authenticates "Bearer <key>" as the identity under key.
type policyIdentities map[string]identity.Identity

func (k policyIdentities) Authenticate(r *http.Request) (identity.Identity, error) {
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	id, ok := k[key]
	if !ok {
		return identity.Identity{}, identity.ErrUnauthenticated
	}
	return id, nil
}

// policyKeys: admins and users of tenants acme and beta.
var policyKeys = policyIdentities{
	"acme-admin": {Tenant: "acme", Agent: "ops", Scopes: []string{"admin"}},
	"acme-bot":   {Tenant: "acme", Agent: "bot", Scopes: []string{"tools"}},
	"beta-admin": {Tenant: "beta", Agent: "ops", Scopes: []string{"*"}},
	"beta-bot":   {Tenant: "beta", Agent: "bot", Scopes: []string{"tools"}},
}

// echoRules allows echo but not of secrets, and lets "fail" run only in
// its PERMANENT form.
const echoRules = `# acme's rules
tenant:
  default: allow
  rules:
    - id: echo-ok
      effect: allow
      tools: [echo]
    - id: no-secrets
      effect: deny
      tools: [echo]
      args: {text: "secret*"}
      reason: secrets stay home
    - id: fail-permanent-only
      effect: deny
      tools: [fail]
      when: args.type != "PERMANENT"
      reason: only permanent failures
tests:
  - tool: echo
    args: {text: secret plans}
    expect: deny
  - tool: echo
    args: {text: hi}
    expect: allow
`

func policyApply(t *testing.T, c toolwirev1connect.DispatcherServiceClient, key, doc string) *toolwirev1.ApplyPolicyResponse {
	t.Helper()
	resp, err := c.ApplyPolicy(t.Context(), as(key, &toolwirev1.ApplyPolicyRequest{Document: doc, Comment: "test"}))
	require.NoError(t, err)
	require.True(t, resp.Msg.InForce, "in force on the replica that answered")
	return resp.Msg
}

func policyCall(t *testing.T, c toolwirev1connect.DispatcherServiceClient, key string, o *toolwirev1.CallRequest) *toolwirev1.CallResponse {
	t.Helper()
	o.Wait = nil
	resp, err := c.Call(t.Context(), as(key, o))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, resp.Msg.State)
	return resp.Msg
}

// policyEvents returns the events of a call, up to its terminal one.
func policyEvents(t *testing.T, c toolwirev1connect.DispatcherServiceClient, key, callID string) []*toolwirev1.CallEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st, err := c.Watch(ctx, as(key, &toolwirev1.WatchRequest{CallId: callID}))
	require.NoError(t, err)
	defer st.Close()
	var out []*toolwirev1.CallEvent
	for st.Receive() {
		out = append(out, st.Msg().Event)
	}
	require.NoError(t, st.Err())
	return out
}

func policyEventOf(evs []*toolwirev1.CallEvent, typ toolwirev1.CallEventType) *toolwirev1.CallEvent {
	i := slices.IndexFunc(evs, func(e *toolwirev1.CallEvent) bool { return e.Type == typ })
	if i < 0 {
		return nil
	}
	return evs[i]
}

// A deny rule answers PERMISSION_DENIED with the rule's reason, never its
// text, and the REJECTED event records the policy version and the rule;
// an allowed call carries the version and the allowing rule on its
// ACCEPTED event and on the call itself.
func TestPolicyDecisionsAreAnsweredAndRecorded(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys, Dispatcher: dispatch.Config{AcceptedRecordDelay: -1}})
	applied := policyApply(t, s.Client, "acme-admin", echoRules)
	require.True(t, applied.Changed)
	require.Equal(t, int32(2), applied.TestsPassed)
	version := applied.Version.Version
	require.True(t, strings.HasPrefix(version, "sha256:"))
	require.Equal(t, "acme", applied.Version.Tenant)
	require.Equal(t, "ops", applied.Version.AppliedBy)

	// Denied: the reason, not the rule's text; nothing queued.
	r := policyCall(t, s.Client, "acme-bot", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"secret plans"}`})
	require.False(t, r.Response.Ok)
	e := r.Response.Error
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, e.Type)
	require.Contains(t, e.Message, "secrets stay home")
	require.NotContains(t, e.Message, "secret*", "the rule's pattern is private")
	require.NotContains(t, e.Message, "no-secrets", "a rule with a reason is not named")
	requireNothingQueued(t, s)
	rej := policyEventOf(policyEvents(t, s.Client, "acme-bot", r.CallId), toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED)
	require.NotNil(t, rej)
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, rej.Policy.GetOutcome())
	require.Equal(t, version, rej.Policy.GetVersion())
	require.Equal(t, "no-secrets", rej.Policy.GetRuleId())
	require.Equal(t, "secrets stay home", rej.Policy.GetReason())

	// A condition decides too.
	r = policyCall(t, s.Client, "acme-bot", &toolwirev1.CallRequest{Tool: "fail", ArgumentsJson: `{"type":"TRANSIENT"}`})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.GetError().GetType())
	require.Contains(t, r.Response.Error.Message, "only permanent failures")

	// Allowed: the version and rule on the ACCEPTED event and the call.
	sub, err := s.Client.Submit(t.Context(), as("acme-bot", &toolwirev1.SubmitRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`}))
	require.NoError(t, err)
	evs := policyEvents(t, s.Client, "acme-bot", sub.Msg.CallId)
	acc := policyEventOf(evs, toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED)
	require.NotNil(t, acc, "policyEvents: %v", evs)
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_ALLOW, acc.Policy.GetOutcome())
	require.Equal(t, version, acc.Policy.GetVersion())
	require.Equal(t, "echo-ok", acc.Policy.GetRuleId())
	fin := policyEventOf(evs, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED)
	require.True(t, fin.GetResponse().GetOk())
	stored := policyStoredCall(t, s, sub.Msg.CallId)
	require.Equal(t, version, stored.PolicyVersion)
	require.Equal(t, "echo-ok", stored.PolicyRule)

	// Another tenant is not under acme's document.
	r = policyCall(t, s.Client, "beta-bot", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"secret plans"}`})
	require.True(t, r.Response.Ok, "%v", r.Response.Error)
}

// policyStoredCall reads a call back from the calls stream.
func policyStoredCall(t *testing.T, s *dispatchtest.Stack, callID string) *toolwirev1.ToolCall {
	t.Helper()
	ctx := t.Context()
	cons, err := s.Env.Bus.Calls.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{s.Env.Bus.Subjects.AllCalls()}})
	require.NoError(t, err)
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err, "call %s not in the calls stream", callID)
		var c toolwirev1.ToolCall
		require.NoError(t, proto.Unmarshal(m.Data(), &c))
		if c.CallId == callID {
			return &c
		}
	}
}

// The policy RPCs need the admin scope; the tenant is the caller's.
func TestPolicyRPCsNeedTheAdminScope(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys})
	ctx := t.Context()
	_, err := s.Client.ApplyPolicy(ctx, as("acme-bot", &toolwirev1.ApplyPolicyRequest{Document: echoRules}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	require.Contains(t, err.Error(), `"admin" scope`)
	_, err = s.Client.GetPolicy(ctx, as("acme-bot", &toolwirev1.GetPolicyRequest{}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	_, err = s.Client.ListPolicyVersions(ctx, as("acme-bot", &toolwirev1.ListPolicyVersionsRequest{}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	_, err = s.Client.Explain(ctx, as("acme-bot", &toolwirev1.ExplainRequest{Tool: "echo"}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	_, err = s.Client.ApplyPolicy(ctx, connect.NewRequest(&toolwirev1.ApplyPolicyRequest{Document: echoRules}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))

	got, err := s.Client.GetPolicy(ctx, as("acme-admin", &toolwirev1.GetPolicyRequest{}))
	require.NoError(t, err)
	require.Nil(t, got.Msg.Version, "refused applies stored nothing")
}

// ApplyPolicy refuses, naming the line, a document whose CEL does not
// compile or whose tests fail; nothing changes. A document over 1 MiB is
// refused before it is parsed; one of 1 MiB fits when the request limit
// is raised (the default limit bounds it first, see doc.go).
func TestApplyPolicyRefusesNamingTheLine(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys, NoWorker: true,
		Dispatcher: dispatch.Config{MaxRequestBytes: 2 << 20}})
	ctx := t.Context()
	good := policyApply(t, s.Client, "acme-admin", echoRules)

	badCEL := strings.Replace(echoRules, `when: args.type != "PERMANENT"`, `when: args.type !=`, 1)
	_, err := s.Client.ApplyPolicy(ctx, as("acme-admin", &toolwirev1.ApplyPolicyRequest{Document: badCEL}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	require.Contains(t, err.Error(), "line 16: tenant.rules[2].when")

	failing := strings.Replace(echoRules, "args: {text: hi}\n    expect: allow", "args: {text: hi}\n    expect: deny", 1)
	_, err = s.Client.ApplyPolicy(ctx, as("acme-admin", &toolwirev1.ApplyPolicyRequest{Document: failing}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	require.Contains(t, err.Error(), "line 22: tests[1]")
	require.Contains(t, err.Error(), "expected deny, got allow")

	dry, err := s.Client.ApplyPolicy(ctx, as("acme-admin", &toolwirev1.ApplyPolicyRequest{Document: "tenant: {default: deny}\n", DryRun: true}))
	require.NoError(t, err)
	require.True(t, dry.Msg.Changed, "it would change")

	cur, err := s.Client.GetPolicy(ctx, as("acme-admin", &toolwirev1.GetPolicyRequest{}))
	require.NoError(t, err)
	require.Equal(t, good.Version.Version, cur.Msg.Version.Version, "refusals and dry runs change nothing")
	require.Equal(t, echoRules, cur.Msg.Document, "comments kept")

	pad := func(n int) string { return "# " + strings.Repeat("x", n-len(echoRules)-3) + "\n" + echoRules }
	_, err = s.Client.ApplyPolicy(ctx, as("acme-admin", &toolwirev1.ApplyPolicyRequest{Document: pad(policy.MaxDocumentBytes + 1)}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	require.Contains(t, err.Error(), "at most 1048576")
	big := pad(policy.MaxDocumentBytes)
	require.Len(t, big, policy.MaxDocumentBytes)
	res := policyApply(t, s.Client, "acme-admin", big)
	require.False(t, res.Changed, "only a comment differs")
	cur, err = s.Client.GetPolicy(ctx, as("acme-admin", &toolwirev1.GetPolicyRequest{}))
	require.NoError(t, err)
	require.Len(t, cur.Msg.Document, policy.MaxDocumentBytes)

	// Under the default request limit a document that large is refused
	// while read.
	small := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys, NoWorker: true})
	_, err = small.Client.ApplyPolicy(ctx, as("acme-admin", &toolwirev1.ApplyPolicyRequest{Document: big}))
	require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err))
}

// A tenant's document never affects another tenant; a tenant without one
// is under the installation document; GetPolicy and ListPolicyVersions
// show the caller's own, or the installation's (tenant "*").
func TestPolicyTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys})
	ctx := t.Context()
	secret := &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"secret"}`}

	inst, err := policystore.NewStore(s.Env.Bus, nil).Apply(ctx, policystore.Installation,
		[]byte("tenant:\n  default: deny\n  rules:\n    - {id: echo-only, effect: allow, tools: [echo]}\n"),
		policystore.ApplyOptions{AppliedBy: "--policy"})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(ctx, policystore.Installation, inst.Version.Version, inst.Revision))

	acme := policyApply(t, s.Client, "acme-admin", echoRules)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, policyCall(t, s.Client, "acme-bot", secret).Response.GetError().GetType())
	require.True(t, policyCall(t, s.Client, "beta-bot", secret).Response.Ok, "beta is under the installation document")
	beta := policyCall(t, s.Client, "beta-bot", &toolwirev1.CallRequest{Tool: "fail", ArgumentsJson: `{"type":"PERMANENT"}`})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, beta.Response.GetError().GetType(), "installation default deny")
	acmeFail := policyCall(t, s.Client, "acme-bot", &toolwirev1.CallRequest{Tool: "fail", ArgumentsJson: `{"type":"PERMANENT"}`})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, acmeFail.Response.GetError().GetType(), "acme's own document replaces the installation's")

	got, err := s.Client.GetPolicy(ctx, as("beta-admin", &toolwirev1.GetPolicyRequest{}))
	require.NoError(t, err)
	require.Equal(t, "*", got.Msg.Version.Tenant)
	require.Equal(t, inst.Version.Version, got.Msg.Version.Version)
	require.Equal(t, "--policy", got.Msg.Version.AppliedBy)
	_, err = s.Client.GetPolicy(ctx, as("beta-admin", &toolwirev1.GetPolicyRequest{Version: acme.Version.Version}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "beta cannot read acme's document")
	_, err = s.Client.GetPolicy(ctx, as("beta-admin", &toolwirev1.GetPolicyRequest{Version: "sha256:../acme"}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))

	second := policyApply(t, s.Client, "acme-admin", "tenant: {default: allow}\n")
	vs, err := s.Client.ListPolicyVersions(ctx, as("acme-admin", &toolwirev1.ListPolicyVersionsRequest{}))
	require.NoError(t, err)
	require.Len(t, vs.Msg.Versions, 2)
	require.Equal(t, second.Version.Version, vs.Msg.Versions[0].Version, "newest first")
	require.Equal(t, acme.Version.Version, vs.Msg.Versions[1].Version)
	require.Equal(t, int32(3), vs.Msg.Versions[1].Rules)
	require.Equal(t, int32(2), vs.Msg.Versions[1].Tests)
	require.Equal(t, "test", vs.Msg.Versions[1].Comment)
	old, err := s.Client.GetPolicy(ctx, as("acme-admin", &toolwirev1.GetPolicyRequest{Version: acme.Version.Version}))
	require.NoError(t, err)
	require.Equal(t, echoRules, old.Msg.Document)
	vs, err = s.Client.ListPolicyVersions(ctx, as("beta-admin", &toolwirev1.ListPolicyVersionsRequest{Limit: 1}))
	require.NoError(t, err)
	require.Len(t, vs.Msg.Versions, 1)
	require.Equal(t, "*", vs.Msg.Versions[0].Tenant)
}

// ListTools, GetTool and the unknown-tool hint hide the tools an
// unconditional deny covers for the caller, and only those.
func TestListToolsHidesDeniedTools(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys})
	ctx := t.Context()
	policyApply(t, s.Client, "acme-admin", `tenant:
  rules:
    - {id: no-fail, effect: deny, tools: [fail]}
    - {id: short-sleeps, effect: deny, tools: [sleep], when: "args.ms > 1000"}
agents:
  bot:
    default: deny
    rules:
      - {id: bot-echo, effect: allow, tools: [echo, fail, sleep]}
`)
	names := func(key string) []string {
		resp, err := s.Client.ListTools(ctx, as(key, &toolwirev1.ListToolsRequest{}))
		require.NoError(t, err)
		var out []string
		for _, sp := range resp.Msg.Tools {
			out = append(out, sp.Name)
		}
		return out
	}
	require.Equal(t, []string{"echo", "sleep"}, names("acme-bot"), "fail denied outright; remember outside the bot's allow list; sleep only sometimes")
	require.Equal(t, []string{"echo", "remember", "sleep"}, names("acme-admin"))
	require.Equal(t, []string{"echo", "fail", "remember", "sleep"}, names("beta-bot"), "another tenant")

	_, err := s.Client.GetTool(ctx, as("acme-bot", &toolwirev1.GetToolRequest{Name: "fail"}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
	_, err = s.Client.GetTool(ctx, as("acme-bot", &toolwirev1.GetToolRequest{Name: "sleep"}))
	require.NoError(t, err)

	r := policyCall(t, s.Client, "acme-bot", &toolwirev1.CallRequest{Tool: "fai", ArgumentsJson: `{}`})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, r.Response.Error.Type)
	require.NotContains(t, r.Response.Error.Suggestion, "fail", "a hidden tool is not suggested")
	r = policyCall(t, s.Client, "beta-bot", &toolwirev1.CallRequest{Tool: "fai", ArgumentsJson: `{}`})
	require.Contains(t, r.Response.Error.Suggestion, "did you mean fail?")

	r = policyCall(t, s.Client, "acme-bot", &toolwirev1.CallRequest{Tool: "fail", ArgumentsJson: `{"type":"PERMANENT"}`})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.Error.Type)
	require.Contains(t, r.Response.Error.Message, "no-fail", "a rule without reason is named by its id")
}

// Explain decides as admission would and says why: every rule naming the
// tool with its layer, effect, whether it matched and why.
func TestExplain(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys})
	ctx := t.Context()
	first := policyApply(t, s.Client, "acme-admin", echoRules)
	policyApply(t, s.Client, "acme-admin", echoRules+`agents:
  bot:
    default: deny
    rules:
      - {id: bot-echo, effect: allow, tools: [echo], reason: the bot may echo}
`)
	explain := func(req *toolwirev1.ExplainRequest) *toolwirev1.ExplainResponse {
		t.Helper()
		resp, err := s.Client.Explain(ctx, as("acme-admin", req))
		require.NoError(t, err)
		return resp.Msg
	}
	x := explain(&toolwirev1.ExplainRequest{Tool: "echo", ArgumentsJson: `{"text":"secret x"}`})
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, x.Decision.Outcome)
	require.Equal(t, "no-secrets", x.Decision.RuleId)
	require.Equal(t, []string{"tenant (default allow)", "agent ops: no layer"}, x.Layers)
	var deny *toolwirev1.ExplainedRule
	for _, r := range x.Rules {
		if r.Id == "no-secrets" {
			deny = r
		}
	}
	require.NotNil(t, deny, "%v", x.Rules)
	require.Equal(t, "tenant", deny.Layer)
	require.Equal(t, "deny", deny.Effect)
	require.True(t, deny.Matched)
	require.Equal(t, "secrets stay home", deny.Reason)
	require.Contains(t, deny.Note, "secret*", "rule text is for admins")
	require.Equal(t, int32(8), deny.Line)
	require.Equal(t, int32(1), x.Others, "fail-permanent-only does not name echo")

	// On behalf of another agent of the tenant: its layer applies.
	x = explain(&toolwirev1.ExplainRequest{Tool: "remember", ArgumentsJson: `{"key":"k","value":"v"}`, Agent: "bot", Session: "s1"})
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, x.Decision.Outcome)
	require.Equal(t, "agent", x.Decision.DefaultLayer)
	require.Contains(t, x.Layers, "agent bot (default deny)")

	// With an earlier version of the document.
	x = explain(&toolwirev1.ExplainRequest{Tool: "remember", ArgumentsJson: `{}`, Agent: "bot", PolicyVersion: first.Version.Version})
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_ALLOW, x.Decision.Outcome)
	require.Equal(t, first.Version.Version, x.Decision.Version)

	// An approval that cannot be found is said so; it covers nothing.
	x = explain(&toolwirev1.ExplainRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`, ApprovalId: "nope"})
	require.NotEmpty(t, x.ApprovalError)

	_, err := s.Client.Explain(ctx, as("acme-admin", &toolwirev1.ExplainRequest{Tool: "echo", ArgumentsJson: `{"a":1,"a":2}`}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	require.Contains(t, err.Error(), "VALIDATION")
	_, err = s.Client.Explain(ctx, as("acme-admin", &toolwirev1.ExplainRequest{Tool: "nope"}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
	_, err = s.Client.Explain(ctx, as("acme-admin", &toolwirev1.ExplainRequest{Tool: "echo", PolicyVersion: "sha256:" + strings.Repeat("0", 64)}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))

	// With no policy in force: allowed, and said so.
	resp, err := s.Client.Explain(ctx, as("beta-admin", &toolwirev1.ExplainRequest{Tool: "echo", ArgumentsJson: `{"text":"secret"}`}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_ALLOW, resp.Msg.Decision.Outcome)
	require.Equal(t, []string{"no policy"}, resp.Msg.Layers)
}
