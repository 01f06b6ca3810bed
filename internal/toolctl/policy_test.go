package toolctl_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/toolctl"
)

// policyAuth authenticates "Bearer <key>" as the identity under key.
type policyAuth map[string]identity.Identity

func (k policyAuth) Authenticate(r *http.Request) (identity.Identity, error) {
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	id, ok := k[key]
	if !ok {
		return identity.Identity{}, identity.ErrUnauthenticated
	}
	return id, nil
}

var policyAcmeKeys = policyAuth{
	"admin": {Tenant: "acme", Agent: "ops", Scopes: []string{"admin"}},
	"bot":   {Tenant: "acme", Agent: "bot", Scopes: []string{"tools"}},
}

const secretsPolicy = `# acme: no secrets through echo
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
tests:
  - tool: echo
    args: {text: secret plans}
    expect: deny
`

func writePolicy(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
	return p
}

// as runs toolctl with the API key key.
func (b *bundle) policyAs(t *testing.T, key string, args ...string) outcome {
	t.Helper()
	return b.run(t, append([]string{"--api-key", key}, args...)...)
}

// toolctl policy apply, show, diff, history and explain, end to end
// against a real dispatcher: refusals name the line, a deny answers the
// rule's reason, explain says which rule and why.
func TestPolicyCommands(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: policyAcmeKeys})

	badCEL := writePolicy(t, "tenant:\n  rules:\n    - id: bad\n      effect: deny\n      tools: [\"*\"]\n      when: args.x ==\n")
	o := b.policyAs(t, "admin", "policy", "apply", badCEL)
	require.Equal(t, toolctl.ExitToolError, o.code, o.stderr)
	require.Contains(t, o.stderr, "error: the policy was refused: invalid document:\n  line 6: tenant.rules[0].when")

	failing := writePolicy(t, strings.Replace(secretsPolicy, "expect: deny", "expect: allow", 1))
	o = b.policyAs(t, "admin", "policy", "apply", failing)
	require.Equal(t, toolctl.ExitToolError, o.code, o.stderr)
	require.Contains(t, o.stderr, "1 of 1 tests fail:\n  line 14: tests[0]: echo: expected allow, got deny")

	good := writePolicy(t, secretsPolicy)
	o = b.policyAs(t, "admin", "policy", "apply", good, "--dry-run")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "dry run: the document is valid; applying it would put sha256:")
	o = b.policyAs(t, "admin", "policy", "show")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stderr, "no policy in force")

	o = b.policyAs(t, "admin", "policy", "apply", good, "--comment", "no secrets")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Regexp(t, `^applied sha256:[0-9a-f]{64} \(2 rules, 1 tests passed\) for tenant acme\nin force on [1-9][0-9]* dispatcher\(s\)\n$`, o.stdout)
	o = b.policyAs(t, "admin", "policy", "apply", good)
	require.Contains(t, o.stdout, "unchanged: sha256:")

	// A deny answers the reason, not the rule.
	o = b.policyAs(t, "bot", "call", "echo", `{"text":"secret plans"}`)
	require.Equal(t, toolctl.ExitToolError, o.code)
	require.Contains(t, o.stderr, "error: PERMISSION_DENIED: policy denies this call of \"echo\": secrets stay home")
	require.NotContains(t, o.stderr, "secret*")

	o = b.policyAs(t, "admin", "policy", "show")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Equal(t, secretsPolicy, o.stdout, "as applied, comments kept")
	require.Contains(t, o.stderr, "tenant acme, applied ")
	require.Contains(t, o.stderr, "by ops: no secrets")

	// diff: a changed rule, then a comment only.
	changed := writePolicy(t, strings.Replace(secretsPolicy, `"secret*"`, `"*secret*"`, 1))
	o = b.policyAs(t, "admin", "policy", "diff", changed)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "--- in force: sha256:")
	require.Contains(t, o.stdout, "+++ "+changed+"\n")
	require.Contains(t, o.stdout, "\n-      args: {text: \"secret*\"}\n+      args: {text: \"*secret*\"}\n")
	require.Contains(t, o.stderr, " is version sha256:")
	recommented := writePolicy(t, strings.Replace(secretsPolicy, "# acme:", "# ACME:", 1))
	o = b.policyAs(t, "admin", "policy", "diff", recommented)
	require.Contains(t, o.stderr, "only comments or layout differ")
	o = b.policyAs(t, "admin", "policy", "diff", good)
	require.Empty(t, o.stdout)
	require.Contains(t, o.stderr, "is the document in force")

	o = b.policyAs(t, "admin", "policy", "apply", changed)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	o = b.policyAs(t, "admin", "policy", "history")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	require.Len(t, lines, 3, o.stdout)
	require.Contains(t, lines[0], "VERSION")
	require.Contains(t, lines[1], "(in force)")
	require.Contains(t, lines[2], "no secrets")

	// explain: the rule that decided, with its layer, and why.
	o = b.policyAs(t, "admin", "policy", "explain", "echo", `{"text":"my *secret* plans"}`, "--agent", "bot", "--session", "s-1")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "outcome:  deny\n")
	require.Contains(t, o.stdout, "decided:  rule no-secrets: secrets stay home\n")
	require.Contains(t, o.stdout, "layers:   tenant (default allow), agent bot: no layer\n")
	require.Regexp(t, `yes +deny +tenant +no-secrets +8 +args\.text is "my \*secret\* plans"`, o.stdout)
	require.Regexp(t, `yes +allow +tenant +echo-ok +5 +no args or when`, o.stdout)
	require.Contains(t, o.stdout, "reason of no-secrets: secrets stay home")
	o = b.policyAs(t, "admin", "-o", "json", "policy", "explain", "echo", `{"text":"hi"}`)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	var x struct {
		Decision struct{ Outcome, RuleID string } `json:"decision"`
	}
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &x))
	require.Equal(t, "POLICY_OUTCOME_ALLOW", x.Decision.Outcome)
	o = b.policyAs(t, "admin", "policy", "explain", "echo", `{"a":1,"a":2}`)
	require.Equal(t, toolctl.ExitToolError, o.code)
	require.Contains(t, o.stderr, "VALIDATION")

	// remove: back to no policy (this test has no installation document);
	// the deny no longer applies.
	o = b.policyAs(t, "admin", "policy", "remove")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Equal(t, "removed; in force now: no policy (every call allowed, tools that require approval ask)\nin force on 1 dispatcher(s)\n", o.stdout)
	o = b.policyAs(t, "bot", "call", "echo", `{"text":"secret plans"}`)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	o = b.policyAs(t, "admin", "policy", "remove")
	require.Contains(t, o.stdout, "your tenant has no document of its own")
	o = b.policyAs(t, "admin", "policy", "history")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "no secrets", "the history stays")
	require.NotContains(t, o.stdout, "(in force)", "after remove none of the tenant's versions is in force")

	// Without the admin scope nothing works.
	for _, args := range [][]string{{"policy", "show"}, {"policy", "history"}, {"policy", "apply", good}, {"policy", "explain", "echo"}, {"policy", "remove"}} {
		o = b.policyAs(t, "bot", args...)
		require.Equal(t, toolctl.ExitToolError, o.code, "%v: %+v", args, o)
		require.Contains(t, o.stderr, `"admin" scope`, args)
	}
}

// toolctl audit shows why each call was allowed (the policy version and
// rule), and --rejected the calls the policy refused, with the rule and
// the reason.
func TestAuditShowsPolicyDecisions(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: policyAcmeKeys})
	o := b.policyAs(t, "admin", "-o", "json", "policy", "apply", writePolicy(t, secretsPolicy))
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	var applied struct {
		Version struct{ Version string } `json:"version"`
	}
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &applied))
	version := applied.Version.Version
	require.NotEmpty(t, version)

	require.Equal(t, toolctl.ExitOK, b.policyAs(t, "bot", "call", "echo", `{"text":"hello"}`).code)
	require.Equal(t, toolctl.ExitToolError, b.policyAs(t, "bot", "call", "echo", `{"text":"secret plans"}`).code)
	require.Equal(t, toolctl.ExitToolError, b.policyAs(t, "bot", "call", "nosuch", `{}`).code)

	type record struct {
		Tool, Admission, Outcome string
		ErrorType                string `json:"error_type"`
		Policy                   *struct {
			Outcome, Version, Rule, Reason string
		}
	}
	read := func(out string) []record {
		var rs []record
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			var r record
			require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
			rs = append(rs, r)
		}
		return rs
	}
	nats := []string{"audit", "--nats-url", b.stack.Env.URL}
	o = b.run(t, nats...)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	rs := read(o.stdout)
	require.Len(t, rs, 1, o.stdout)
	require.Equal(t, "ok", rs[0].Outcome)
	require.NotNil(t, rs[0].Policy, o.stdout)
	require.Equal(t, record{Tool: "echo", Admission: "accepted", Outcome: "ok", Policy: rs[0].Policy}, rs[0])
	require.Equal(t, "allow", rs[0].Policy.Outcome)
	require.Equal(t, version, rs[0].Policy.Version)
	require.Equal(t, "echo-ok", rs[0].Policy.Rule)

	o = b.run(t, append(nats, "--rejected")...)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	rs = read(o.stdout)
	require.Len(t, rs, 2, o.stdout)
	require.Equal(t, "rejected", rs[0].Outcome)
	require.Equal(t, "PERMISSION_DENIED", rs[0].ErrorType)
	require.Equal(t, "deny", rs[0].Policy.Outcome)
	require.Equal(t, version, rs[0].Policy.Version)
	require.Equal(t, "no-secrets", rs[0].Policy.Rule)
	require.Equal(t, "secrets stay home", rs[0].Policy.Reason)
	require.Equal(t, "NOT_FOUND", rs[1].ErrorType)
	require.Nil(t, rs[1].Policy, "another step refused it")

	o = b.run(t, append(nats, "--rejected", "--outcome", "PERMISSION_DENIED")...)
	require.Len(t, read(o.stdout), 1, o.stdout)
	o = b.run(t, append(nats, "--rejected", "--tool", "nosuch")...)
	require.Len(t, read(o.stdout), 1, o.stdout)
	o = b.run(t, append(nats, "--rejected", "--verify")...)
	require.Equal(t, toolctl.ExitUsage, o.code, o.stderr)
}

// policy explain --mode decides as if the session were in that mode: the
// mode's layer and its rule are named; a mode the policy does not declare
// is refused.
func TestPolicyExplainInMode(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: policyAcmeKeys})
	doc := writePolicy(t, "tenant:\n  default: allow\nmodes:\n  voice:\n    rules:\n      - {id: voice-quiet, effect: deny, tools: [echo], reason: no echo on a call}\n  text: {}\n")
	o := b.policyAs(t, "admin", "policy", "apply", doc)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)

	o = b.policyAs(t, "admin", "policy", "explain", "echo", `{"text":"hi"}`, "--mode", "voice")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "outcome:  deny\n")
	require.Contains(t, o.stdout, "decided:  rule voice-quiet: no echo on a call\n")
	require.Contains(t, o.stdout, "mode voice (no default)")
	require.Regexp(t, `yes +deny +mode voice +voice-quiet`, o.stdout)

	o = b.policyAs(t, "admin", "policy", "explain", "echo", `{"text":"hi"}`, "--mode", "text")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "outcome:  allow\n")

	o = b.policyAs(t, "admin", "policy", "explain", "echo", "--mode", "shout")
	require.Equal(t, toolctl.ExitToolError, o.code)
	require.Contains(t, o.stderr, `mode "shout"`)
}

// Under a policy's sessions section, toolctl call without --session is
// refused (sessions.required), a session nobody opened is refused
// SESSION_INACTIVE until `session mode SESSION ""` opens it, and policy
// explain shows the section and decides in the default mode.
func TestSessionRulesThroughToolctl(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: policyAcmeKeys})
	doc := writePolicy(t, "tenant:\n  default: allow\nmodes:\n  voice:\n    rules:\n      - {id: voice-quiet, effect: deny, tools: [sleep]}\n"+
		"sessions:\n  required: true\n  opened_only: true\n  default_mode: voice\n")
	o := b.policyAs(t, "admin", "policy", "apply", doc)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)

	o = b.policyAs(t, "bot", "call", "echo", `{"text":"hi"}`)
	require.Equal(t, toolctl.ExitToolError, o.code)
	require.Contains(t, o.stderr, "error: PERMISSION_DENIED: the tenant's policy requires every call to name its session (sessions.required)")
	o = b.policyAs(t, "bot", "call", "echo", `{"text":"hi"}`, "--session", "s-1")
	require.Equal(t, toolctl.ExitToolError, o.code)
	require.Contains(t, o.stderr, `error: SESSION_INACTIVE: session "s-1" was never opened`)
	require.Contains(t, o.stderr, "toolctl session mode")

	o = b.policyAs(t, "admin", "session", "mode", "s-1", "")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	o = b.policyAs(t, "bot", "call", "echo", `{"text":"hi"}`, "--session", "s-1")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	o = b.policyAs(t, "bot", "call", "sleep", `{"duration":"1ms"}`, "--session", "s-1")
	require.Equal(t, toolctl.ExitToolError, o.code)
	require.Contains(t, o.stderr, `error: MODE_RESTRICTED: mode "voice" forbids this call of "sleep"`)

	o = b.policyAs(t, "admin", "policy", "explain", "sleep")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "outcome:  deny\n")
	require.Contains(t, o.stdout, "mode voice (no default)")
	require.Contains(t, o.stdout, "sessions: required, opened_only, default_mode voice; this call names no session")
}

// policy explain --model decides as if the call were made for that
// model: a rule on caller.model_family (derived from model_families)
// decides; a model that is not one is refused.
func TestPolicyExplainForModel(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: policyAcmeKeys})
	doc := writePolicy(t, "tenant:\n  default: allow\n  rules:\n    - {id: no-gpt-echo, effect: deny, tools: [echo], when: 'caller.model_family == \"gpt\"', reason: not for gpt}\nmodel_families:\n  - {family: gpt, models: [\"o[0-9]*\"]}\n")
	o := b.policyAs(t, "admin", "policy", "apply", doc)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)

	o = b.policyAs(t, "admin", "policy", "explain", "echo", `{"text":"hi"}`, "--model", "o3")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "outcome:  deny\n")
	require.Contains(t, o.stdout, "decided:  rule no-gpt-echo: not for gpt\n")
	o = b.policyAs(t, "admin", "policy", "explain", "echo", `{"text":"hi"}`, "--model", "claude-sonnet-4-5")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "outcome:  allow\n")
	o = b.policyAs(t, "admin", "policy", "explain", "echo", "--model", "not a model")
	require.Equal(t, toolctl.ExitToolError, o.code)
	require.Contains(t, o.stderr, "not a model name")
}
