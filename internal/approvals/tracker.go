package approvals

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Tracker keeps, in memory, the summaries of the records that still need
// something done: pending ones (they expire) and decided ones not
// published yet (a replica stopped between a decision and its publish).
// It follows the headers of every record write (a headers-only ordered
// consumer from the last write of each key on), so it costs no read of a
// record's body and holds nothing for settled records. Every dispatcher
// replica runs one for its sweep (Due).
type Tracker struct {
	s   *Store
	log *slog.Logger

	mu      sync.Mutex
	pending map[string]Summary // by key
	cc      jetstream.ConsumeContext
	cons    jetstream.Consumer
	stopped chan struct{} // closed once Stop has ended it; nil before Stop
}

// NewTracker returns a tracker over s's bucket; Start starts it.
func NewTracker(s *Store, log *slog.Logger) *Tracker {
	return &Tracker{s: s, log: log, pending: map[string]Summary{}}
}

// Start begins following the bucket. It returns once the consumer runs;
// the summaries of the records stored now arrive shortly after (Due sees
// them as they do).
func (t *Tracker) Start(ctx context.Context) error {
	cons, err := t.s.js.OrderedConsumer(ctx, t.s.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{t.s.subject + callPrefix + ">"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy, HeadersOnly: true, InactiveThreshold: time.Minute})
	if err != nil {
		return fmt.Errorf("approvals: tracker: %w", err)
	}
	cc, err := cons.Consume(t.onWrite, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		t.log.Debug("approvals tracker", "err", err)
	}))
	if err != nil {
		t.s.deleteConsumer(cons)
		return fmt.Errorf("approvals: tracker: %w", err)
	}
	t.mu.Lock()
	t.cc, t.cons = cc, cons
	t.mu.Unlock()
	return nil
}

// Stop ends the tracker and waits until its last callback has returned
// and its server consumer is deleted, or until ctx ends (then a later Stop
// waits again). Idempotent; safe before Start (startstop.Service).
func (t *Tracker) Stop(ctx context.Context) error {
	t.mu.Lock()
	if t.stopped == nil {
		done := make(chan struct{})
		t.stopped = done
		cc, cons := t.cc, t.cons
		t.cc = nil
		if cc == nil {
			close(done)
		} else {
			go func() {
				defer close(done)
				cc.Stop()
				<-cc.Closed()
				t.s.deleteConsumer(cons)
			}()
		}
	}
	done := t.stopped
	t.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Tracker) onWrite(m jetstream.Msg) {
	key := m.Subject()[len(t.s.subject):]
	var rev uint64
	if md, err := m.Metadata(); err == nil {
		rev = md.Sequence.Stream
	}
	sum, ok := summaryOf(key, m.Headers(), rev)
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok && (!sum.Published || sum.State == toolwirev1.ApprovalState_APPROVAL_STATE_PENDING) {
		t.pending[key] = sum
		return
	}
	delete(t.pending, key) // settled, deleted or expired
}

// Note records a write this replica made, so that its own sweep sees it
// before the consumer delivers it.
func (t *Tracker) Note(r *Record) {
	sum := Summary{Tenant: r.Tenant(), ID: r.ID(), State: r.Approval.GetState(), Published: r.Published,
		Expires: r.Approval.GetExpiresAt().AsTime(), Revision: r.Revision}
	if d := r.Approval.GetDecidedAt(); d != nil {
		sum.Decided = d.AsTime()
	}
	key := CallKey(sum.Tenant, sum.ID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, ok := t.pending[key]; ok && prev.Revision > sum.Revision {
		return // the consumer delivered a later write already
	}
	if !sum.Published || sum.State == toolwirev1.ApprovalState_APPROVAL_STATE_PENDING {
		t.pending[key] = sum
		return
	}
	delete(t.pending, key)
}

// Due returns the records the sweep must act on at now: pending ones past
// their expiry, and decided ones not published whose decision is older
// than grace (a decision younger than that is still being published by
// the replica that made it), oldest first, at most limit.
func (t *Tracker) Due(now time.Time, grace time.Duration, limit int) []Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Summary
	for _, s := range t.pending {
		switch {
		case s.State == toolwirev1.ApprovalState_APPROVAL_STATE_PENDING && !now.Before(s.Expires):
		case s.State != toolwirev1.ApprovalState_APPROVAL_STATE_PENDING && !s.Published && now.Sub(s.Decided) >= grace:
		default:
			continue
		}
		out = append(out, s)
	}
	sortByID(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// Pending returns the pending records the tracker follows, by tenant,
// oldest first within each.
func (t *Tracker) Pending() map[string][]Summary {
	t.mu.Lock()
	var all []Summary
	for _, s := range t.pending {
		if s.State == toolwirev1.ApprovalState_APPROVAL_STATE_PENDING {
			all = append(all, s)
		}
	}
	t.mu.Unlock()
	sortByID(all)
	out := map[string][]Summary{}
	for _, s := range all {
		out[s.Tenant] = append(out[s.Tenant], s)
	}
	return out
}

// Len is how many records the tracker follows (pending or unpublished).
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

func sortByID(s []Summary) {
	slices.SortFunc(s, func(a, b Summary) int { return strings.Compare(a.ID, b.ID) })
}

// Forget drops the record of call id in tenant (it no longer exists).
func (t *Tracker) Forget(tenant, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, CallKey(tenant, id))
}
