package policy_test

import (
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// A production starter policy: deny what no rule allows, let read-only
// tools run, ask a person before anything destructive, never touch /etc.
const starter = `
tenant:
  default: deny
  rules:
    - id: read-only-tools
      effect: allow
      tools: ["*"]
      when: tool.annotations.read_only
    - id: builtins
      effect: allow
      tools: [echo, remember, fs_*]
    - id: destructive-asks
      effect: ask
      tools: ["*"]
      when: tool.annotations.destructive
      reason: destructive tools need a person's approval
    - id: no-etc
      effect: deny
      tools: [fs_*]
      args: {path: "/etc/**"}
      reason: system files are off limits
agents:
  support-bot:
    rules:
      - id: bot-no-writes
        effect: deny
        tools: [fs_write]
        reason: the support bot does not write files
tests:
  - {tool: fs_read, args: {path: /etc/passwd}, annotations: {read_only: true}, expect: deny}
  - {tool: fs_write, args: {path: /tmp/x}, expect: ask}
  - {tool: fs_write, args: {path: /tmp/x}, caller: {agent: support-bot}, expect: deny}
  - {tool: shell, annotations: {destructive: false}, expect: deny}
`

func ExampleParse() {
	p, err := policy.Parse([]byte(starter))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.RunTests(nil); err != nil { // an apply refuses a document whose tests fail
		fmt.Println(err)
		return
	}
	fsWrite := &toolwirev1.ToolSpec{Name: "fs_write", Version: "sha256:1"}
	caller := &toolwirev1.Caller{Tenant: "acme", Agent: "assistant", Session: "s-42"}
	args, _ := policy.ParseArgs([]byte(`{"path": "/tmp/notes.txt", "text": "hi"}`))

	d := p.Decide(policy.Input{Tool: fsWrite, Args: args, Caller: caller})
	fmt.Println(d.Outcome, d.RuleID(), "-", d.Reason())

	// An approver grants fs_write to the session: the same call is allowed.
	grant := policy.Grant{ID: "g-1", Layer: policy.LayerSession, Tenant: "acme", Session: "s-42", Tool: "fs_write",
		Args: map[string]string{"path": "/tmp/**"}}
	d = p.Decide(policy.Input{Tool: fsWrite, Args: args, Caller: caller, Grants: policy.GrantList{grant}})
	fmt.Println(d.Outcome, "covered by grant", d.Grant.ID, "of the ask by", d.RuleID())

	// No grant covers a deny.
	etc, _ := policy.ParseArgs([]byte(`{"path": "/etc/hosts"}`))
	d = p.Decide(policy.Input{Tool: fsWrite, Args: etc, Caller: caller, Grants: policy.GrantList{grant}})
	fmt.Println(d.Outcome, d.RuleID(), "-", d.Reason())

	// ListTools hides from the support bot what its layer denies outright.
	bot := &toolwirev1.Caller{Tenant: "acme", Agent: "support-bot"}
	fmt.Println("fs_write hidden from the bot:", p.Hidden("fs_write", bot), "from the assistant:", p.Hidden("fs_write", caller))
	// Output:
	// ask destructive-asks - destructive tools need a person's approval
	// allow covered by grant g-1 of the ask by destructive-asks
	// deny no-etc - system files are off limits
	// fs_write hidden from the bot: true from the assistant: false
}

func ExamplePolicy_Explain() {
	p, err := policy.Parse([]byte(starter))
	if err != nil {
		fmt.Println(err)
		return
	}
	fsRead := &toolwirev1.ToolSpec{Name: "fs_read", Annotations: &toolwirev1.ToolAnnotations{ReadOnly: proto.Bool(true)}}
	caller := &toolwirev1.Caller{Tenant: "acme", Agent: "support-bot", Session: "s-7"}
	args, _ := policy.ParseArgs([]byte(`{"path": "/etc/shadow"}`))
	x := p.Explain(policy.Input{Tool: fsRead, Args: args, Caller: caller, Now: time.Now()})
	fmt.Print(x.String())
	// Output:
	// outcome: deny
	// policy:  sha256:82cc0bcc3e46a5ffc47d506d5790769ee01fc52c73b577a63d2ba29696818848
	// call:    fs_read by tenant acme, agent support-bot, session s-7
	// because: tenant rule "no-etc" (line 17): system files are off limits
	// layers:  tenant (default deny), agent support-bot (no default)
	// rules naming the tool:
	//   match    deny  tenant rule "no-etc" (line 17): args.path is "/etc/shadow"; the pattern is "/etc/**": some value matches
	//   no match ask   tenant rule "destructive-asks" (line 12): when "tool.annotations.destructive" is false
	//   match    allow tenant rule "builtins" (line 9): no args or when: the tool name decides
	//   match    allow tenant rule "read-only-tools" (line 5): when "tool.annotations.read_only" is true
	// other rules: 1 (they do not name the tool)
}
