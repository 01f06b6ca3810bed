package tool

import (
	"context"
	"sync"
)

// Reporter receives progress from a running tool. Workers install one in
// the tool's context; tools call Progress. A Reporter that also
// implements PartialReporter receives the tool's partial output
// (Partial).
type Reporter interface {
	// Progress reports liveness and, optionally, a message and a percentage
	// in [0, 100] (negative = unknown).
	Progress(message string, percent float64)
}

type reporterKey struct{}

// reporting is what WithReporter puts in a context: the reporter and the
// partial output sent through it so far (each WithReporter starts a new
// count: a worker installs one per attempt).
type reporting struct {
	r Reporter

	// mu is held while a chunk is counted and handed to the reporter, so
	// that chunks reach it one at a time, in the order of their numbers.
	mu     sync.Mutex
	chunks int
	bytes  int
	closed bool // a bound was reached: nothing more is sent
}

// WithReporter returns ctx carrying r.
func WithReporter(ctx context.Context, r Reporter) context.Context {
	return context.WithValue(ctx, reporterKey{}, &reporting{r: r})
}

// Progress reports progress of the running call: it becomes a PROGRESS
// event that Watch streams, and it counts as a heartbeat for tools whose
// spec sets a heartbeat timeout (a tool silent for longer is abandoned and
// retried). Outside a call it does nothing. percent < 0 means unknown.
func Progress(ctx context.Context, message string, percent float64) {
	if rp, ok := ctx.Value(reporterKey{}).(*reporting); ok {
		rp.r.Progress(message, percent)
	}
}
