package callindex

import "errors"

// ErrTooManySubscribers is returned by Subscribe when MaxSubscribers
// subscriptions are open.
var ErrTooManySubscribers = errors.New("callindex: too many live subscriptions")

// Subscribe returns a channel of live updates: every call indexed and
// every call whose outcome changes, from Ready on, and a function that
// ends the subscription (idempotent). The channel holds SubscriberBuffer
// updates; updates that find it full are dropped for this subscriber
// (Stats.Dropped) so that a slow reader never holds the feeder up. The
// channel is closed when the subscription ends or a run of the feed ends.
// Past MaxSubscribers open subscriptions it returns ErrTooManySubscribers.
func (x *Index) Subscribe() (<-chan Entry, func(), error) {
	x.subMu.Lock()
	defer x.subMu.Unlock()
	if len(x.subs) >= MaxSubscribers {
		return nil, func() {}, ErrTooManySubscribers
	}
	s := &subscriber{ch: make(chan Entry, SubscriberBuffer)}
	x.subs[s] = struct{}{}
	return s.ch, func() {
		x.subMu.Lock()
		defer x.subMu.Unlock()
		if _, ok := x.subs[s]; ok {
			delete(x.subs, s)
			close(s.ch)
		}
	}, nil
}

type subscriber struct{ ch chan Entry }

// hasSubscribers reports whether anyone listens.
func (x *Index) hasSubscribers() bool {
	x.subMu.Lock()
	defer x.subMu.Unlock()
	return len(x.subs) > 0
}

// publish hands e to every subscriber that has room.
func (x *Index) publish(e Entry) {
	x.subMu.Lock()
	defer x.subMu.Unlock()
	for s := range x.subs {
		select {
		case s.ch <- e:
		default:
			x.dropped.Add(1)
		}
	}
}

// closeSubscribers ends every subscription.
func (x *Index) closeSubscribers() {
	x.subMu.Lock()
	defer x.subMu.Unlock()
	for s := range x.subs {
		delete(x.subs, s)
		close(s.ch)
	}
}
