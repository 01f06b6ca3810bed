package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// sessionKeys is a key file: "ops-key" an admin of tenant acme (the
// orchestrator), "bot-key" an agent of acme with the tools scope.
func sessionKeys(t *testing.T) *identity.APIKeys {
	t.Helper()
	doc := "keys:\n"
	for key, line := range map[string]string{"ops-key": "agent: ops, scopes: [admin, tools]", "bot-key": "agent: bot, scopes: [tools]"} {
		sum := sha256.Sum256([]byte(key))
		doc += fmt.Sprintf("  - {sha256: %s, tenant: acme, %s}\n", hex.EncodeToString(sum[:]), line)
	}
	f := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(f, []byte(doc), 0o600))
	k, err := identity.LoadAPIKeys(f)
	require.NoError(t, err)
	return k
}

// The escape the session rules close, through the API with real keys:
// an agent whose session the orchestrator put in voice mode calls sleep
// without a session, or in a session nobody opened. Under the tenant's
// sessions section (required, opened_only, default_mode voice) the first
// is refused PERMISSION_DENIED (the REJECTED event naming the rule), the
// second SESSION_INACTIVE; a session the orchestrator opened runs in its
// mode; ListTools without a session hides what the default mode hides;
// Explain says what the section does.
func TestSessionRulesThroughAPI(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: sessionKeys(t)})
	ctx := t.Context()
	sleep := func(session string) *toolwirev1.ToolResponse {
		return policyCall(t, s.Client, "bot-key", &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`, Session: session}).Response
	}
	policyApply(t, s.Client, "ops-key", modesPolicy)
	_, err := s.Client.SetSessionMode(ctx, as("ops-key", &toolwirev1.SetSessionModeRequest{Session: "s-voice", Mode: "voice"}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, sleep("s-voice").GetError().GetType())
	require.True(t, sleep("").GetOk(), "the escape, before the section: no session")
	require.True(t, sleep("s-made-up").GetOk(), "the escape, before the section: a fresh session")

	policyApply(t, s.Client, "ops-key", modesPolicy+"sessions: {required: true, opened_only: true, default_mode: voice}\n")
	r := sleep("")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetMessage(), "sessions.required")
	rej := policyEventOf(policyEvents(t, s.Client, "bot-key", r.GetCallId()), toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED)
	require.NotNil(t, rej, "the refusal is recorded")
	require.Equal(t, "sessions.required", rej.Policy.GetRuleId())

	r = sleep("s-made-up")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetMessage(), "never opened")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, sleep("s-voice").GetError().GetType())

	_, err = s.Client.SetSessionMode(ctx, as("ops-key", &toolwirev1.SetSessionModeRequest{Session: "s-open"}))
	require.NoError(t, err, "an empty mode opens a session without one")
	r = sleep("s-open")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, r.GetError().GetType(), "an opened session without a mode is in the default mode")
	echo := policyCall(t, s.Client, "bot-key", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`, Session: "s-open"})
	require.True(t, echo.Response.GetOk(), "%v", echo.Response.GetError())

	lt, err := s.Client.ListTools(ctx, as("bot-key", &toolwirev1.ListToolsRequest{}))
	require.NoError(t, err)
	for _, spec := range lt.Msg.Tools {
		require.NotEqual(t, "sleep", spec.GetName(), "the default mode hides it")
	}

	x, err := s.Client.Explain(ctx, as("ops-key", &toolwirev1.ExplainRequest{Tool: "sleep"}))
	require.NoError(t, err)
	require.Contains(t, x.Msg.Sessions, "required, opened_only, default_mode voice")
	require.Contains(t, x.Msg.Sessions, "names no session")
	require.Contains(t, x.Msg.Layers, "mode voice (no default)", "decided in the default mode")
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, x.Msg.Decision.GetOutcome())
	_, err = s.Client.Explain(ctx, as("bot-key", &toolwirev1.ExplainRequest{Tool: "sleep"}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
}
