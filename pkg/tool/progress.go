package tool

import "context"

// Reporter receives progress from a running tool. Workers install one in
// the tool's context; tools call Progress.
type Reporter interface {
	// Progress reports liveness and, optionally, a message and a percentage
	// in [0, 100] (negative = unknown).
	Progress(message string, percent float64)
}

type reporterKey struct{}

// WithReporter returns ctx carrying r.
func WithReporter(ctx context.Context, r Reporter) context.Context {
	return context.WithValue(ctx, reporterKey{}, r)
}

// Progress reports progress of the running call: it becomes a PROGRESS
// event that Watch streams, and it counts as a heartbeat for tools whose
// spec sets a heartbeat timeout (a tool silent for longer is abandoned and
// retried). Outside a call it does nothing. percent < 0 means unknown.
func Progress(ctx context.Context, message string, percent float64) {
	if r, ok := ctx.Value(reporterKey{}).(Reporter); ok {
		r.Progress(message, percent)
	}
}
