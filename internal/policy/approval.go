package policy

import (
	"context"
	"fmt"

	"github.com/toolwire/toolwire/internal/envelope"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ApprovalCovers reports whether an approval covers call, a call of the
// tool spec (which requires approval). It is the one place the approval
// flow plugs in. Until that flow exists no approval is ever valid: it
// returns false for every call, whatever its approval_token holds.
func ApprovalCovers(_ context.Context, _ *toolwirev1.ToolSpec, _ *toolwirev1.ToolCall) bool {
	return false
}

// CheckApproval returns nil when call may run as far as approval goes:
// its tool does not require approval, or an approval covers it. Otherwise
// it returns the CONFIRMATION_REQUIRED error to answer with, raised before
// execution (not retryable, no side effects).
func CheckApproval(ctx context.Context, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall) *toolwirev1.ToolError {
	if !spec.GetRequiresApproval() || ApprovalCovers(ctx, spec, call) {
		return nil
	}
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED,
		fmt.Sprintf("tool %q requires approval, and no approval covers this call", spec.GetName()))
	te.Suggestion = "this installation cannot grant approvals yet: calls to a tool that requires approval are refused"
	return te
}
