package worker

import (
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Retry defaults, used where a tool's RetryPolicy leaves a field zero.
const (
	DefaultMaxAttempts     = 3
	DefaultInitialInterval = 200 * time.Millisecond
	DefaultMaxInterval     = 30 * time.Second
	DefaultMultiplier      = 2.0
	DefaultJitter          = 0.2
)

type retryPolicy struct {
	maxAttempts  int
	initial      time.Duration
	maxInterval  time.Duration
	multiplier   float64
	jitter       float64
	nonRetryable []toolwirev1.ErrorType
}

func policyOf(spec *toolwirev1.ToolSpec) retryPolicy {
	p := spec.GetRetry()
	rp := retryPolicy{maxAttempts: DefaultMaxAttempts, initial: DefaultInitialInterval, maxInterval: DefaultMaxInterval,
		multiplier: DefaultMultiplier, jitter: DefaultJitter, nonRetryable: p.GetNonRetryable()}
	if p == nil {
		return rp
	}
	if p.MaxAttempts > 0 {
		rp.maxAttempts = int(p.MaxAttempts)
	}
	if d := p.InitialInterval.AsDuration(); d > 0 {
		rp.initial = d
	}
	if d := p.MaxInterval.AsDuration(); d > 0 {
		rp.maxInterval = d
	}
	if p.Multiplier >= 1 {
		rp.multiplier = p.Multiplier
	}
	if p.Jitter > 0 && p.Jitter <= 1 {
		rp.jitter = p.Jitter
	}
	return rp
}

func (rp retryPolicy) backoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.Multiplier, b.RandomizationFactor = rp.initial, rp.maxInterval, rp.multiplier, rp.jitter
	b.MaxElapsedTime = 0 // bounded by attempts and the call deadline instead
	b.Reset()
	return b
}

// safeToRerun reports whether running the tool again cannot duplicate a
// side effect: it is read-only or idempotent.
func safeToRerun(spec *toolwirev1.ToolSpec) bool {
	a := spec.GetAnnotations()
	return a.GetReadOnly() || a.GetIdempotent()
}

// retryable decides whether an attempt that failed with te may run again:
// the error says retryable, the policy does not exclude its type, and a
// rerun cannot duplicate effects (the tool is safe to rerun, or the error
// reports no partial side effects).
func (rp retryPolicy) retryable(spec *toolwirev1.ToolSpec, te *toolwirev1.ToolError) bool {
	if !te.Retryable || slices.Contains(rp.nonRetryable, te.Type) {
		return false
	}
	switch te.Type {
	case toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, toolwirev1.ErrorType_ERROR_TYPE_EXPIRED,
		toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME:
		return false
	}
	return safeToRerun(spec) || te.PartialSideEffects == toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
}
