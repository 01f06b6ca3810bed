package poolview

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// pausedRetryAfter is the retry_after of a call refused because its pool
// is paused: a pause lasts as long as an administrator wants, so the
// caller is told to come back in a while, not at once.
const pausedRetryAfter = 30 * time.Second

// Pause is a pool's pause as the view last read it from the pool's
// consumer (bus.PausePool).
type Pause struct {
	// Paused: the consumer delivers nothing (its PauseUntil is ahead).
	Paused bool
	// Record is who paused the pool through toolwire, when and why; nil
	// when no one did.
	Record *bus.PoolPause
	// Drift says how the pause and its record disagree ("paused outside
	// toolwire …", "resumed outside toolwire …": someone used the NATS
	// API with the operator credential); "" when they agree. The pool's
	// workers put the record's state back (internal/worker, "Pool
	// consumers put back"); until then the pause as it is decides.
	Drift string
}

// pauseOf reads the pause of a pool consumer.
func pauseOf(ci *jetstream.ConsumerInfo) *Pause {
	p := &Pause{Paused: ci.Paused, Record: bus.RecordedPause(ci.Config)}
	switch {
	case p.Paused && p.Record == nil:
		p.Drift = "paused outside toolwire: no record of who paused it"
	case !p.Paused && p.Record != nil:
		p.Drift = "resumed outside toolwire: paused by " + p.Record.By + " and not resumed through toolwire"
	}
	return p
}

// pausedRefusal is the OVERLOADED answer to a call whose pool is paused:
// retryable, nothing queued; the calls queued before the pause stay
// queued and run once it is resumed.
func pausedRefusal(pool string, p *Pause) *toolwirev1.ToolError {
	by := "by an administrator"
	if p.Record == nil {
		by = "outside toolwire (its consumer was paused through the NATS API)"
	}
	te := overloaded("pool "+pool+" is paused "+by+": it takes no new calls until it is resumed", pausedRetryAfter)
	te.Suggestion = "retry after retry_after; an installation administrator resumes the pool (toolctl pool resume " + pool + ")"
	return te
}

// Reread asks for a read of the pools now and waits for it (at most
// about a second, or until ctx ends): after this replica paused or
// resumed a pool, its admission follows at once rather than within a
// refresh interval.
func (l *Load) Reread(ctx context.Context) { l.awaitRead(ctx) }
