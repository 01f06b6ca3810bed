package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Bound as a before-hook on every tool, scan_secrets refuses a call whose
// arguments hold a fake AWS key, naming the kind and not the key; other
// calls run.
func TestScanSecretsAsABeforeHook(t *testing.T) {
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), scanSecrets)})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation,
		[]byte("tenant: {default: allow}\nhooks:\n  - {id: secrets, phase: before, tool: scan_secrets, tools: [\"*\"]}\n"), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	call := func(text string) *toolwirev1.ToolResponse {
		r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "echo",
			ArgumentsJson: `{"text":"` + text + `"}`}, 30*time.Second)
		require.NoError(t, err)
		return r.Response
	}
	r := call("deploy with AKIAABCDEFGHIJKLMNOP please")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType())
	require.Contains(t, r.GetError().GetMessage(), "an AWS access key id")
	require.NotContains(t, r.GetError().GetMessage(), "AKIAABCDEFGHIJKLMNOP")
	require.True(t, call("nothing secret here").Ok)
}
