// Command secret-hook is a worker serving scan_secrets, a before-hook
// (docs/policy.md, "Hooks") that refuses calls whose arguments hold
// something that looks like a credential: bind it in a policy document,
//
//	hooks:
//	  - {id: secrets, phase: before, tool: scan_secrets, tools: ["*"]}
//
// and every call is looked at before the rules decide. Its answer names
// the kind of secret, never the secret. It takes and answers the hook
// contract's types (pkg/hook).
package main

import (
	"context"
	"regexp"

	"github.com/toolwire/toolwire/pkg/hook"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

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
func scan(_ context.Context, in hook.BeforeRequest) (hook.BeforeAnswer, error) {
	for _, p := range secretPatterns {
		if p.re.Match(in.Arguments) {
			return hook.BeforeAnswer{Action: hook.Deny, Reason: "the arguments hold what looks like " + p.kind + "; credentials never travel in tool arguments"}, nil
		}
	}
	return hook.BeforeAnswer{Action: hook.Continue}, nil
}

var scanSecrets = tool.Must(tool.New("scan_secrets", scan,
	tool.WithSummary("A before-hook: refuses calls whose arguments hold a credential (AWS keys, private keys, GitHub and Slack tokens)."),
	tool.ReadOnly(), tool.Idempotent(),
))

func main() {
	toolworker.Main(scanSecrets)
}
