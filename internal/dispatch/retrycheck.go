package dispatch

import (
	"context"

	"github.com/toolwire/toolwire/internal/dlq"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// CheckRetry is the dlq.Check of the dispatcher's dead-letter retries
// (its retry service and the dashboard's Retry): a retry runs a call
// again without admission, so it is decided as an approval of a parked
// call is (approvalCore.Denies): a call whose session ended is refused
// SESSION_INACTIVE, one the session's mode now forbids (its policy layer,
// or the spec's definition for the mode: definitionRefusal) MODE_RESTRICTED,
// one the policy in force now denies PERMISSION_DENIED; an error when the
// session or the registry does not answer.
func (d *Dispatcher) CheckRetry(ctx context.Context, call *toolwirev1.ToolCall) (*dlq.Refusal, error) {
	ref, err := approvalCore{d}.Denies(ctx, call)
	if err != nil || ref == nil {
		return nil, err
	}
	return &dlq.Refusal{Type: ref.Type, Why: ref.Why}, nil
}
