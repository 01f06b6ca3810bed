package worker

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// heartbeater sends InProgress for every call in flight of one pool, every
// interval, from one goroutine (not one per call).
type heartbeater struct {
	every time.Duration
	log   *slog.Logger
	mu    sync.Mutex
	msgs  map[jetstream.Msg]struct{} // comparable: a pointer underneath
	done  chan struct{}
	wg    sync.WaitGroup
}

func newHeartbeater(every time.Duration, log *slog.Logger) *heartbeater {
	h := &heartbeater{every: every, log: log, msgs: map[jetstream.Msg]struct{}{}, done: make(chan struct{})}
	h.wg.Add(1)
	go h.run()
	return h
}

// add keeps msg alive until remove(msg).
func (h *heartbeater) add(msg jetstream.Msg) {
	h.mu.Lock()
	h.msgs[msg] = struct{}{}
	h.mu.Unlock()
}

// remove stops heartbeating msg; removing it again has no effect.
func (h *heartbeater) remove(msg jetstream.Msg) {
	h.mu.Lock()
	delete(h.msgs, msg)
	h.mu.Unlock()
}

func (h *heartbeater) run() {
	defer h.wg.Done()
	t := time.NewTicker(h.every)
	defer t.Stop()
	var batch []jetstream.Msg
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		batch = batch[:0]
		h.mu.Lock()
		for m := range h.msgs {
			batch = append(batch, m)
		}
		h.mu.Unlock()
		for _, m := range batch {
			// A call settled since the batch was taken: nothing to keep alive.
			if err := m.InProgress(); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
				h.log.Warn("heartbeat failed", "subject", m.Subject(), "err", err)
			}
		}
	}
}

// stop ends the heartbeats and waits for the goroutine.
func (h *heartbeater) stop() {
	close(h.done)
	h.wg.Wait()
}
