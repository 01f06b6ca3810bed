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
