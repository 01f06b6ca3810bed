// Package policytest holds the policy documents that benchmarks and tests
// of several packages share.
package policytest

import (
	"fmt"
	"strings"
)

// FiftyRules is a 50-rule policy: 30 tenant rules and 20 in agent's layer;
// of them 20 apply to every tool ("*"), half with an args glob and half
// with a CEL condition, and 30 name specific tools by glob. The tenant
// default is allow and the agent's is ask; allow names the tools the
// agent's first allow rule allows besides its own globs. A call of an
// allowed tool whose arguments match no deny is allowed after every ask
// and allow rule that names it is evaluated.
func FiftyRules(agent string, allow ...string) string {
	var b strings.Builder
	rule := func(indent string, id, effect, tools, extra string) {
		fmt.Fprintf(&b, "%s  - {id: %s, effect: %s, tools: [%s]%s}\n", indent, id, effect, tools, extra)
	}
	b.WriteString("tenant:\n  default: allow\n  rules:\n")
	for i := range 5 {
		rule("  ", fmt.Sprintf("t-args-deny-%d", i), "deny", `"*"`, fmt.Sprintf(`, args: {path: "/secret%d/**"}, reason: no`, i))
		rule("  ", fmt.Sprintf("t-cel-ask-%d", i), "ask", `"*"`, fmt.Sprintf(`, when: "has(args.size) && args.size > %d && tool.annotations.destructive"`, 1000+i))
	}
	for i := range 5 {
		rule("  ", fmt.Sprintf("t-nested-%d", i), "deny", `"*"`, fmt.Sprintf(`, args: {repo.owner: "evil-%d-*"}`, i))
		rule("  ", fmt.Sprintf("t-cel-deny-%d", i), "deny", `"*"`, fmt.Sprintf(`, when: "caller.session.startsWith('blocked-%d') || 'banned%d' in caller.scopes"`, i, i))
	}
	for i := range 10 {
		rule("  ", fmt.Sprintf("t-tool-%d", i), []string{"deny", "ask"}[i%2], fmt.Sprintf(`"tool_%d*", "mcp__srv%d__*"`, i, i), "")
	}
	fmt.Fprintf(&b, "agents:\n  %s:\n    default: ask\n    rules:\n", agent)
	for i := range 20 {
		switch {
		case i < 10:
			tools := fmt.Sprintf(`"tool_%d", "other_%d_*"`, i, i)
			if i == 0 {
				for _, t := range allow {
					tools += fmt.Sprintf(", %q", t)
				}
			}
			rule("    ", fmt.Sprintf("a-tool-%d", i), "allow", tools, "")
		case i < 15:
			rule("    ", fmt.Sprintf("a-args-%d", i), "allow", `"fs_*"`, fmt.Sprintf(`, args: {path: "/data/**", repo.owner: "acme-*"}, when: "args.size < %d"`, 10000+i))
		default:
			rule("    ", fmt.Sprintf("a-deny-%d", i), "deny", `"fs_delete", "fs_chmod"`, "")
		}
	}
	return b.String()
}
