package hooks

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Start starts the after-hook service: it answers the workers'
// AfterHookRequests on bus.AfterHookSubject (one queue group of every
// replica), each on a goroutine of its own, at most maxAfterHookWork at
// once, until Stop. Start returns once it is subscribed.
func (hs *Hooks) Start(ctx context.Context) error { return hs.svc.Start(ctx) }

// Stop stops the after-hook service: no request is taken after it, the
// hook calls under way are cancelled (their requests are answered "retry":
// another replica serves them), and Stop waits for them, or until ctx
// ends.
func (hs *Hooks) Stop(ctx context.Context) error { return hs.svc.Stop(ctx) }

// serve subscribes the after-hook service; the Funcs' StartFunc.
func (hs *Hooks) serve(ctx context.Context) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var work sync.WaitGroup
	slots := make(chan struct{}, maxAfterHookWork)
	b := hs.cfg.Bus
	workerInboxes := bus.InboxPrefix(b.Config, bus.RoleWorker) + "."
	sub, err := b.NC.QueueSubscribe(bus.AfterHookSubject(b.Config), "dispatchers", func(m *nats.Msg) {
		// A worker's request (its inboxes) or an in-process worker's
		// (_INBOX.): a message a push consumer was pointed here with
		// carries a $JS.ACK reply, and is nobody's request.
		if !strings.HasPrefix(m.Reply, workerInboxes) && !strings.HasPrefix(m.Reply, nats.InboxPrefix) {
			hs.log.Warn("after-hook request refused: not from a worker", "reply", m.Reply)
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			hs.respond(m, &toolwirev1.AfterHookReply{RetryReason: "busy"})
			return
		}
		work.Add(1)
		go func() {
			defer work.Done()
			defer func() { <-slots }()
			hs.respond(m, hs.runAfter(sctx, m.Data))
		}()
	})
	if err != nil {
		cancel()
		return fmt.Errorf("hooks: serve after-hooks: %w", err)
	}
	unsubscribe := bus.Unsubscriber(sub)
	hs.svc.StopFunc = func() <-chan struct{} {
		subDone := unsubscribe()
		cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			<-subDone // no callback adds work after this
			work.Wait()
		}()
		return done
	}
	return nil
}

// respond answers a worker. A reply that cannot be sent (one over the
// connection's payload limit) is replaced by a small one that withholds
// the result: the worker must not take the silence for hooks that did not
// answer, which fail open ones would let pass.
func (hs *Hooks) respond(m *nats.Msg, reply *toolwirev1.AfterHookReply) {
	data, err := proto.Marshal(reply)
	if err == nil {
		err = m.Respond(data)
	}
	if err == nil {
		return
	}
	hs.log.Warn("after-hook reply failed; the result is withheld", "err", err)
	if data, err = proto.Marshal(&toolwirev1.AfterHookReply{Notes: reply.Notes,
		Withheld: withheld("", fmt.Errorf("the after-hooks' answer could not be sent: %w", err))}); err == nil {
		err = m.Respond(data)
	}
	if err != nil {
		hs.log.Warn("after-hook reply failed", "err", err)
	}
}
