// Command secret-hook is a worker serving scan_secrets, a before-hook
// (docs/policy.md, "Hooks") that refuses calls whose arguments hold
// something that looks like a credential: bind it in a policy document,
//
//	hooks:
//	  - {id: secrets, phase: before, tool: scan_secrets, tools: ["*"]}
//
// and every call is looked at before the rules decide. Its answer names
// the kind of secret, never the secret.
package main

import (
	"context"
	"encoding/json"
	"regexp"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// HookRequest is what a before-hook gets (the dispatcher's contract).
type HookRequest struct {
	Hook        string          `json:"hook"`
	Tool        string          `json:"tool"`
	SpecVersion string          `json:"spec_version"`
	Arguments   json.RawMessage `json:"arguments"`
	Caller      struct {
		Tenant  string `json:"tenant"`
		Agent   string `json:"agent"`
		Session string `json:"session,omitempty"`
	} `json:"caller"`
}

// HookAnswer is a before-hook's answer.
type HookAnswer struct {
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
}

// secretPatterns are the kinds of credential the hook refuses.
var secretPatterns = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"an AWS access key id", regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{"a private key", regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
	{"a GitHub token", regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}\b`)},
	{"a Slack token", regexp.MustCompile(`\bxox[abpr]-[A-Za-z0-9-]{10,}\b`)},
}

// scan looks at the call's arguments as they are sent (JSON text, so a
// secret in any field, nested or not, is found).
func scan(_ context.Context, in HookRequest) (HookAnswer, error) {
	for _, p := range secretPatterns {
		if p.re.Match(in.Arguments) {
			return HookAnswer{Action: "deny", Reason: "the arguments hold what looks like " + p.kind + "; credentials never travel in tool arguments"}, nil
		}
	}
	return HookAnswer{Action: "continue"}, nil
}

var scanSecrets = tool.Must(tool.New("scan_secrets", scan,
	tool.WithSummary("A before-hook: refuses calls whose arguments hold a credential (AWS keys, private keys, GitHub and Slack tokens)."),
	tool.ReadOnly(), tool.Idempotent(),
))

func main() {
	toolworker.Main(scanSecrets)
}
