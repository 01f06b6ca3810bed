package dlq

import (
	"context"
	"errors"
	"fmt"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Refusal is why a Check refuses a retry: the error type admission would
// refuse the call with now, and why.
type Refusal struct {
	Type toolwirev1.ErrorType
	Why  string
}

// Check decides whether call, the new call a retry would queue, may run
// now: a Refusal, nil to queue it, or an error when it cannot be decided
// (the retry is then not queued either). The dispatcher supplies it
// (dispatch.Dispatcher.CheckRetry): the same check an approval of a
// parked call makes.
type Check func(ctx context.Context, call *toolwirev1.ToolCall) (*Refusal, error)

// Errors a retry refused by its Check matches, by the refusal's type.
var (
	// ErrSessionInactive: the call's session has ended (SESSION_INACTIVE).
	ErrSessionInactive = errors.New("dlq: retry refused: the call's session has ended")
	// ErrModeRestricted: the session's mode now forbids the call, or the
	// policy no longer declares the mode (MODE_RESTRICTED).
	ErrModeRestricted = errors.New("dlq: retry refused: the session's mode forbids the call")
	// ErrPolicyDenies: the policy in force now denies the call
	// (PERMISSION_DENIED, or any other refusal type).
	ErrPolicyDenies = errors.New("dlq: retry refused: the policy in force denies the call")
)

// CheckWith makes q ask c before it queues a retry (RetryBy); it returns
// q. A Queue without one queues every retry of a decodable call: the
// dispatcher's queues (its retry service and its dashboard) have one.
func (q *Queue) CheckWith(c Check) *Queue {
	q.check = c
	return q
}

// checkRetry asks q's check about call, the retry of the dead letter at
// seq; nil to queue it.
func (q *Queue) checkRetry(ctx context.Context, call *toolwirev1.ToolCall, dead string, seq uint64) error {
	if q.check == nil {
		return nil
	}
	ref, err := q.check(ctx, call)
	if err != nil {
		return fmt.Errorf("dlq: check the retry of %s (dead letter %d): %w", dead, seq, err)
	}
	if ref == nil {
		return nil
	}
	sentinel := ErrPolicyDenies
	switch ref.Type {
	case toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE:
		sentinel = ErrSessionInactive
	case toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED:
		sentinel = ErrModeRestricted
	}
	return fmt.Errorf("%w (%s, call %s, dead letter %d): %s", sentinel, ref.Type, dead, seq, ref.Why)
}
