package hook_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/pkg/hook"
)

// A before-hook that masks what looks like a card number: it rewrites the
// arguments of the calls it sees one in, and lets the others continue.
func Example() {
	mask := func(in hook.BeforeRequest) hook.BeforeAnswer {
		if !strings.Contains(string(in.Arguments), "4111") {
			return hook.BeforeAnswer{Action: hook.Continue}
		}
		masked := strings.ReplaceAll(string(in.Arguments), "4111 1111 1111 1111", "[card]")
		return hook.BeforeAnswer{Action: hook.Rewrite, Reason: "a card number", Arguments: json.RawMessage(masked)}
	}

	// What the dispatcher sends as the hook tool's arguments.
	var req hook.BeforeRequest
	if err := json.Unmarshal([]byte(`{"hook": "cards", "tool": "send_mail", "spec_version": "v1",
		"arguments": {"body": "pay with 4111 1111 1111 1111"},
		"caller": {"tenant": "acme", "agent": "support-bot"}}`), &req); err != nil {
		fmt.Println(err)
		return
	}
	out, _ := json.Marshal(mask(req))
	fmt.Println(string(out))
	// Output:
	// {"action":"rewrite","reason":"a card number","arguments":{"body":"pay with [card]"}}
}

// The dispatcher reads a before-hook's answer from the hook call's
// structured result (or its first text block): an empty action is
// Continue.
func ExampleBeforeAnswer() {
	for _, result := range []string{
		`{"action": "deny", "reason": "no production writes on Fridays"}`,
		`{}`,
	} {
		var ans hook.BeforeAnswer
		if err := json.Unmarshal([]byte(result), &ans); err != nil {
			fmt.Println(err)
			return
		}
		if ans.Action == "" {
			ans.Action = hook.Continue
		}
		fmt.Printf("%s %q\n", ans.Action, ans.Reason)
	}
	// Output:
	// deny "no production writes on Fridays"
	// continue ""
}
