package tool

import (
	"context"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// CallInfo describes the call a tool is executing.
type CallInfo struct {
	CallID  string
	Tool    string
	Attempt int32
	Caller  *toolwirev1.Caller
	// Input is set when the call continues an exchange in which the tool
	// asked for input (read it with InputFrom).
	Input *toolwirev1.InputRound
	// ClientCapabilities are the caller's declared client capabilities as
	// a JSON object; empty when it declared none (see ClientCan).
	ClientCapabilities string
}

type callInfoKey struct{}

// WithCallInfo returns a context carrying info. Workers call it; tools read
// it with CallInfoFrom.
func WithCallInfo(ctx context.Context, info CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

// CallInfoFrom returns the call a tool is executing, if ctx carries one.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	info, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return info, ok
}
