package hook_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/pkg/hook"
)

// The JSON field names are the contract hooks in any language rely on
// (docs/policy.md, "Hooks").
func TestTheJSONContract(t *testing.T) {
	t.Parallel()
	req := hook.AfterRequest{Hook: "pii", Phase: hook.PhaseAfter, CallID: "c1", Tool: "echo", SpecVersion: "v1",
		Arguments: json.RawMessage(`{"text":"hi"}`),
		Caller:    hook.Caller{Tenant: "acme", Agent: "bot", Session: "s", User: "u", Run: "r"},
		Response: hook.Response{OK: false, Content: json.RawMessage(`[]`), StructuredContent: json.RawMessage(`{"a":1}`),
			Error:         &hook.Error{Type: "ERROR_TYPE_VALIDATION", Message: "no"},
			InputRequests: map[string]hook.InputRequest{"ok": {Method: "elicitation/create", Params: json.RawMessage(`{}`)}}},
	}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	require.JSONEq(t, `{"hook":"pii","phase":"after","call_id":"c1","tool":"echo","spec_version":"v1",
		"arguments":{"text":"hi"},
		"caller":{"tenant":"acme","agent":"bot","session":"s","user":"u","run":"r"},
		"response":{"ok":false,"content":[],"structured_content":{"a":1},
			"error":{"type":"ERROR_TYPE_VALIDATION","message":"no"},
			"input_requests":{"ok":{"method":"elicitation/create","params":{}}}}}`, string(b))

	var ans hook.AfterAnswer
	require.NoError(t, json.Unmarshal([]byte(`{"action":"redact","reason":"pii","content":[{"type":"text","text":"x"}],
		"structured_content":null,"annotations":{"k":"v"}}`), &ans))
	require.Equal(t, hook.Redact, ans.Action)
	require.Equal(t, "pii", ans.Reason)
	require.JSONEq(t, `[{"type":"text","text":"x"}]`, string(ans.Content))
	require.Equal(t, "null", string(ans.StructuredContent), "null is kept: it drops the structured output")
	require.Equal(t, map[string]string{"k": "v"}, ans.Annotations)

	b, err = json.Marshal(hook.BeforeRequest{Hook: "h", Tool: "t", SpecVersion: "v", Arguments: json.RawMessage(`{}`),
		Caller: hook.Caller{Tenant: "acme", Agent: "bot"}})
	require.NoError(t, err)
	require.JSONEq(t, `{"hook":"h","tool":"t","spec_version":"v","arguments":{},"caller":{"tenant":"acme","agent":"bot"}}`, string(b))
}
