package bus

import (
	"context"

	"github.com/nats-io/nats.go"
)

// InternalKeyOption is the in-process user's credential as a client
// option, for tests that try it over TCP.
func (e *Embedded) InternalKeyOption() nats.Option {
	return nats.Nkey(e.internalPub(), e.internalKey.Sign)
}

// The steps of a pause or resume after which SetPauseHook's hook runs.
const (
	PauseStepRecorded = pauseStepRecorded
	PauseStepMatched  = pauseStepMatched
)

// SetPauseHook makes b run hook after each step of its pauses and
// resumes (PauseStepRecorded, PauseStepMatched), as when another
// replica's write lands between them: a test cannot pin that
// interleaving otherwise. Call it before b pauses anything.
func SetPauseHook(b *Bus, hook func(ctx context.Context, step string)) {
	b.pauseHook = hook
}
