package bus

import (
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Unsubscriber returns what ends an asynchronous core subscription: it
// unsubscribes and returns a channel closed once the last callback has
// returned (the subscription's closed handler has run). It sets sub's
// closed handler; call it once, right after subscribing.
func Unsubscriber(sub *nats.Subscription) func() <-chan struct{} {
	done := make(chan struct{})
	sub.SetClosedHandler(func(string) { close(done) })
	return func() <-chan struct{} {
		if err := sub.Unsubscribe(); errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
			// Closed with the connection before: its handler ran then, or
			// (closed before the handler was set) never will.
			select {
			case <-done:
			default:
				closed := make(chan struct{})
				close(closed)
				return closed
			}
		}
		return done
	}
}

// DrainWatch takes what a KV watch's updates channel holds once its
// context ended, so that a delivery of nats.go blocked on the full
// channel returns and its goroutine ends. It never blocks.
func DrainWatch(w jetstream.KeyWatcher) {
	for range len(w.Updates()) + 1 {
		select {
		case <-w.Updates():
		default:
		}
	}
}
