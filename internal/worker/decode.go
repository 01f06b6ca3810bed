package worker

import (
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// BadCallError says why a delivered message cannot be run. It is never
// retried: the message is terminated with Reason and dead-lettered.
type BadCallError struct{ Reason string }

func (e *BadCallError) Error() string { return "bad call: " + e.Reason }

// DecodeCall decodes a delivered call and checks its integrity: it has an
// id and a caller whose tenant is a valid tenant name (bus.ValidTenant),
// it belongs to the pool's executor type, and the subject it arrived on
// agrees with its payload (so a tenant or tool in the subject cannot be
// smuggled; the tenant token must equal the tenant exactly). On a *BadCallError the call is returned too when it
// could be decoded, so that it can be answered.
func DecodeCall(subjects bus.Subjects, pool toolwirev1.ExecutorType, subject string, data []byte) (*toolwirev1.ToolCall, error) {
	call := &toolwirev1.ToolCall{}
	if err := proto.Unmarshal(data, call); err != nil {
		return nil, &BadCallError{Reason: "undecodable call: " + err.Error()}
	}
	if call.CallId == "" || call.Caller == nil {
		return nil, &BadCallError{Reason: "undecodable call: call_id or caller missing"}
	}
	if !bus.ValidTenant(call.Caller.Tenant) {
		// Refused, never mapped to a subject token: a.b would run and be
		// answered as tenant a_b.
		return call, &BadCallError{Reason: fmt.Sprintf("tenant %q is not a valid tenant name (%s)", call.Caller.Tenant, bus.TenantPattern)}
	}
	if call.Executor != pool {
		return call, &BadCallError{Reason: fmt.Sprintf("call of executor %s delivered to a %s pool", call.Executor, pool)}
	}
	// Live calls arrive on their call subject, replays (shadow pools only
	// consume those) on the matching shadow subject.
	if !subjects.IsCall(subject, call.Executor, call.Caller.GetTenant(), call.Provider, call.Tool) {
		want := subjects.Call(call.Executor, call.Caller.GetTenant(), call.Provider, call.Tool)
		return call, &BadCallError{Reason: fmt.Sprintf("subject %q disagrees with the call (want %q)", subject, want)}
	}
	return call, nil
}

// sameTenant reports whether the tenant token of a call subject is the
// payload's tenant exactly, and a valid tenant name: a tenant is never
// mapped to a token (a.b would answer as a_b).
func (w *Worker) sameTenant(subject string, call *toolwirev1.ToolCall) bool {
	// <prefix>.call.<type>.<tenant>.<provider>.<tool>
	tenant := call.GetCaller().GetTenant()
	parts := strings.SplitN(subject, ".", 5)
	return len(parts) >= 4 && parts[3] == tenant && bus.ValidTenant(tenant)
}
