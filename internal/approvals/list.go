package approvals

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// MaxListLimit bounds the records one List returns.
const MaxListLimit = 1000

// DefaultListLimit is List's limit when the filter gives none.
const DefaultListLimit = 100

// Filter selects the records List returns.
type Filter struct {
	// State keeps one state; UNSPECIFIED = every state.
	State toolwirev1.ApprovalState
	// Tool is a glob of tool names (path.Match's syntax: *, ?, [...]);
	// "" = every tool.
	Tool string
	// Agent and Session keep one agent's, one session's; "" = any.
	Agent, Session string
	// Limit is the most records returned: 0 = DefaultListLimit, at most
	// MaxListLimit.
	Limit int
}

// ErrBadFilter: the filter's tool glob or limit is not valid.
var ErrBadFilter = errors.New("approvals: bad filter")

func (f *Filter) check() error {
	if _, err := path.Match(f.Tool, ""); err != nil {
		return fmt.Errorf("%w: tool glob %q: %w", ErrBadFilter, f.Tool, err)
	}
	if f.Limit < 0 || f.Limit > MaxListLimit {
		return fmt.Errorf("%w: limit %d is not within 0 to %d", ErrBadFilter, f.Limit, MaxListLimit)
	}
	f.Limit = cmp.Or(f.Limit, DefaultListLimit)
	return nil
}

func (f *Filter) match(s Summary) bool {
	if f.State != toolwirev1.ApprovalState_APPROVAL_STATE_UNSPECIFIED && s.State != f.State {
		return false
	}
	if f.Agent != "" && s.Agent != f.Agent {
		return false
	}
	if f.Session != "" && s.Session != f.Session {
		return false
	}
	if f.Tool != "" {
		if ok, _ := path.Match(f.Tool, s.Tool); !ok {
			return false
		}
	}
	return true
}

// List returns tenant's records that match f, newest first (ids are
// ULIDs: time-ordered), at most f.Limit of them, and whether more
// matched. It reads the summaries of the tenant's records from the
// headers of their writes (a headers-only consumer, so no record's body
// is loaded to filter it) keeping only the f.Limit+1 newest matches, then
// reads those records: memory is bounded by the limit, whatever the
// number of records.
func (s *Store) List(ctx context.Context, tenant string, f Filter) ([]*Record, bool, error) {
	if !bus.ValidTenant(tenant) {
		return nil, false, fmt.Errorf("%w: tenant %q", ErrBadFilter, tenant)
	}
	if err := f.check(); err != nil {
		return nil, false, err
	}
	newest := &idHeap{}
	err := s.scan(ctx, s.subject+callPrefix+tenant+".>", func(sum Summary) {
		if !f.match(sum) {
			return
		}
		heap.Push(newest, sum.ID)
		if newest.Len() > f.Limit+1 {
			heap.Pop(newest) // the oldest
		}
	})
	if err != nil {
		return nil, false, err
	}
	truncated := newest.Len() > f.Limit
	if truncated {
		heap.Pop(newest)
	}
	ids := make([]string, newest.Len())
	for i := len(ids) - 1; i >= 0; i-- {
		ids[i] = heap.Pop(newest).(string)
	}
	out := make([]*Record, 0, len(ids))
	for _, id := range ids {
		r, err := s.Get(ctx, tenant, id)
		if errors.Is(err, ErrNotFound) {
			continue // expired since the scan
		}
		if err != nil {
			return nil, false, err
		}
		out = append(out, r)
	}
	return out, truncated, nil
}

// scanTimeout bounds one scan of the bucket's headers.
const scanTimeout = time.Minute

// scan calls fn with the summary of every record on subjects matching
// filter, in stream order, as they are when the scan starts (the last
// write per key; deleted and expired keys are skipped).
func (s *Store) scan(ctx context.Context, filter string, fn func(Summary)) error {
	ctx, cancel := context.WithTimeout(ctx, scanTimeout)
	defer cancel()
	cons, err := s.js.OrderedConsumer(ctx, s.stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter},
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, HeadersOnly: true, InactiveThreshold: scanTimeout})
	if err != nil {
		return fmt.Errorf("approvals: scan: %w", err)
	}
	defer s.deleteConsumer(cons)
	info := cons.CachedInfo()
	if info == nil || info.NumPending == 0 {
		return nil
	}
	// Each fetch asks for what is left (at most 1000), so it returns as
	// soon as those arrive rather than waiting out its expiry.
	left := info.NumPending
	for left > 0 {
		batch, err := cons.Fetch(int(min(left, 1000)), jetstream.FetchContext(ctx))
		if err != nil {
			return fmt.Errorf("approvals: scan: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			left = md.NumPending
			if sum, ok := summaryOf(m.Subject()[len(s.subject):], m.Headers(), md.Sequence.Stream); ok {
				fn(sum)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("approvals: scan: %w", err)
		}
		if got == 0 && ctx.Err() != nil {
			return fmt.Errorf("approvals: scan: %w", ctx.Err())
		}
	}
	return nil
}

func (s *Store) deleteConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.js.DeleteConsumer(ctx, s.stream, info.Name) // else the server removes it when inactive
}

// idHeap is a min-heap of ULIDs: the oldest on top.
type idHeap []string

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
