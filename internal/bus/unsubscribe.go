package bus

import (
	"errors"

	"github.com/nats-io/nats.go"
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
