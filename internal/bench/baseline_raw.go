package bench

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// rawWorker is jetstream-raw's worker side: one Consume callback (nats.go's
// default pull settings: up to 500 messages buffered, a new pull at half)
// that publishes each call's result asynchronously with
// ExpectLastSequencePerSubject(0) and hands its future to one acker
// goroutine, which acks the call once the result's PubAck has come (or
// naks it when the publish failed). A call is never acked before its
// result is stored, and the callback never waits for the server.
type rawWorker struct {
	b    *baseline
	cc   jetstream.ConsumeContext
	acks chan pendingAck
	done chan struct{}

	// mu is held by the callback while it runs and by stop when it closes
	// acks: ConsumeContext.Closed can report the end of consuming while
	// the last callback still runs.
	mu      sync.Mutex
	stopped bool
}

// pendingAck is a call whose result is published and not yet stored.
type pendingAck struct {
	fut jetstream.PubAckFuture
	msg jetstream.Msg
}

// startRawWorker starts the acker and the Consume callback.
func startRawWorker(b *baseline) (*rawWorker, error) {
	// The consumer holds at most baseMaxAckPending calls unacked, and each
	// pendingAck is one of them: the callback never blocks on the channel.
	w := &rawWorker{b: b, acks: make(chan pendingAck, baseMaxAckPending), done: make(chan struct{})}
	go w.ackLoop()
	cc, err := b.cons.Consume(w.onCall, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		b.log.Warn("consume", "err", err)
	}))
	if err != nil {
		close(w.acks)
		<-w.done
		return nil, err
	}
	w.cc = cc
	return w, nil
}

// onCall is the Consume callback: it publishes the call's result and
// queues the call's ack behind the result's PubAck.
func (w *rawWorker) onCall(msg jetstream.Msg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return // no caller waits any more: left to AckWait
	}
	id, ok := w.b.callID(msg)
	if !ok {
		return
	}
	fut, err := w.b.workerJS.PublishAsync(baseResultPrefix+id, w.b.p.result.with(id), jetstream.WithExpectLastSequencePerSubject(0))
	if err != nil {
		w.b.log.Error("publish result failed", "err", err)
		if err := msg.NakWithDelay(time.Second); err != nil {
			w.b.log.Error("nak failed", "err", err)
		}
		return
	}
	w.acks <- pendingAck{fut: fut, msg: msg}
}

// ackLoop acks each call once its result is stored, in the order the
// results were published (one connection's PubAcks of one stream come
// back in that order). Every future resolves: the worker's JetStream
// context bounds each publish (WithPublishAsyncTimeout).
func (w *rawWorker) ackLoop() {
	defer close(w.done)
	for a := range w.acks {
		select {
		case <-a.fut.Ok():
			if err := a.msg.Ack(); err != nil {
				w.b.log.Error("ack failed", "err", err)
			}
		case err := <-a.fut.Err():
			w.b.log.Error("publish result failed", "err", err)
			if err := a.msg.NakWithDelay(time.Second); err != nil {
				w.b.log.Error("nak failed", "err", err)
			}
		}
	}
}

// stop ends the Consume callback (waiting for the one running), then
// lets the acker settle every call it holds.
func (w *rawWorker) stop() {
	w.cc.Stop()
	<-w.cc.Closed()
	w.mu.Lock()
	w.stopped = true
	close(w.acks)
	w.mu.Unlock()
	<-w.done
}
