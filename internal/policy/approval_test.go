package policy_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Until the approval flow exists, no approval covers any call: a tool that
// requires approval is refused whatever token the call carries, with a
// pre-execution CONFIRMATION_REQUIRED; other tools are not affected.
func TestApprovalFailsClosed(t *testing.T) {
	t.Parallel()
	gated := &toolwirev1.ToolSpec{Name: "wipe", RequiresApproval: true}
	for _, token := range []string{"", "garbage", "eyJhbGciOiJIUzI1NiJ9.e30.ZRrHA1JJJW8opsbCGfG_HACGpVUMN_a9IV7pAx_Zmeo"} {
		call := &toolwirev1.ToolCall{CallId: "c", Tool: "wipe", ApprovalToken: token}
		require.False(t, policy.ApprovalCovers(t.Context(), gated, call), token)
		te := policy.CheckApproval(t.Context(), gated, call)
		require.NotNil(t, te, token)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, te.Type)
		require.False(t, te.Retryable)
		require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.PartialSideEffects)
		require.Contains(t, te.Message, `"wipe"`)
	}
	free := &toolwirev1.ToolSpec{Name: "echo"}
	require.Nil(t, policy.CheckApproval(t.Context(), free, &toolwirev1.ToolCall{CallId: "c", Tool: "echo", ApprovalToken: "garbage"}))
}
