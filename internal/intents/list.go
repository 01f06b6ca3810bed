package intents

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// Bounds of a listing: a page holds DefaultPageSize sessions unless asked
// otherwise, at most MaxPageSize; one listing reads at most MaxScanned
// records of the bucket (so that filters that match little cannot make
// one request read a tenant's every session: the page is then short and
// has a next page token).
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
	MaxScanned      = 5000
)

// ErrBadPageToken: the page token is not one a listing returned.
var ErrBadPageToken = errors.New("intents: malformed page token")

// ListQuery selects the sessions of one tenant a listing returns.
type ListQuery struct {
	Tenant string
	// State: every session (unspecified), the active or the ended ones.
	State toolwirev1.SessionStateFilter
	// Mode, when not empty, keeps the sessions in that mode.
	Mode string
	// PageSize: 0 = DefaultPageSize; more than MaxPageSize is lowered to it.
	PageSize int
	// PageToken: a previous page's Next; empty = from the start.
	PageToken string
}

// ListPage is one page of a listing.
type ListPage struct {
	// Sessions without their log, state values and applied keys.
	Sessions []*toolwirev1.Session
	// Next is the token of the next page; empty when the listing is done.
	Next string
}

// listTimeout bounds one page's read of the bucket.
const listTimeout = 30 * time.Second

// List reads one page of the sessions of q.Tenant from the sessions
// bucket (bucket, read through js), in the order of their last update,
// oldest first: the bucket keeps one record per key (history 1), so its
// stream, read from a sequence on with the tenant's key prefix as the
// filter ("<tenant>.>", SessionKey), holds each of the tenant's sessions
// once, at its last update, and a page token is the stream sequence to go
// on from. Reading stops at the page (or after MaxScanned records), one
// batch of records at a time, so that no listing holds a tenant's every
// session. A session updated while a listing pages on moves to the end
// of the stream: a later page shows it again. Deleted and expired keys
// are skipped; an undecodable record too. Newest first would mean reading
// every key of the tenant before the first page; update order does not.
func List(ctx context.Context, js jetstream.JetStream, bucket string, q ListQuery) (ListPage, error) {
	if !bus.ValidTenant(q.Tenant) {
		return ListPage{}, fmt.Errorf("intents: tenant %q does not match %s", q.Tenant, bus.TenantPattern)
	}
	start := uint64(1)
	if q.PageToken != "" {
		n, err := strconv.ParseUint(q.PageToken, 10, 64)
		if err != nil || n == 0 {
			return ListPage{}, ErrBadPageToken
		}
		start = n
	}
	size := q.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	size = min(size, MaxPageSize)
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "KV_"+bucket, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"$KV." + bucket + "." + bus.Token(q.Tenant) + ".>"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: start, InactiveThreshold: listTimeout})
	if err != nil {
		return ListPage{}, fmt.Errorf("intents: list sessions: %w", err)
	}
	defer deleteOrdered(js, bucket, cons)
	return readPage(ctx, cons, q, size)
}

// readPage reads the page of q (size sessions) from cons.
func readPage(ctx context.Context, cons jetstream.Consumer, q ListQuery, size int) (ListPage, error) {
	var page ListPage
	info := cons.CachedInfo()
	if info == nil || info.NumPending == 0 {
		return page, nil
	}
	left, scanned := info.NumPending, 0
	for left > 0 {
		batch, err := cons.Fetch(int(min(left, 256)), jetstream.FetchContext(ctx))
		if err != nil {
			return ListPage{}, fmt.Errorf("intents: list sessions: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			scanned++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			left = md.NumPending
			if s := listed(m); s != nil && q.matches(s) {
				page.Sessions = append(page.Sessions, s)
			}
			if left > 0 && (len(page.Sessions) == size || scanned >= MaxScanned) {
				page.Next = strconv.FormatUint(md.Sequence.Stream+1, 10)
				return page, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return ListPage{}, fmt.Errorf("intents: list sessions: %w", err)
		}
		if got == 0 && ctx.Err() != nil {
			return ListPage{}, fmt.Errorf("intents: list sessions: %w", ctx.Err())
		}
	}
	return page, nil
}

// listed is the session a bucket record holds, as a listing shows it
// (without log, state values and applied keys), or nil for a delete
// marker or an undecodable record.
func listed(m jetstream.Msg) *toolwirev1.Session {
	if h := m.Headers(); h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != "" {
		return nil
	}
	s := &toolwirev1.Session{}
	if err := proto.Unmarshal(m.Data(), s); err != nil {
		return nil
	}
	s.Log, s.StateJson, s.Applied = nil, nil, nil
	return s
}

// matches reports whether s passes q's filters.
func (q ListQuery) matches(s *toolwirev1.Session) bool {
	switch q.State {
	case toolwirev1.SessionStateFilter_SESSION_STATE_FILTER_ACTIVE:
		if s.GetEnded() {
			return false
		}
	case toolwirev1.SessionStateFilter_SESSION_STATE_FILTER_ENDED:
		if !s.GetEnded() {
			return false
		}
	}
	return q.Mode == "" || s.GetMode() == q.Mode
}

// deleteOrdered deletes a listing's consumer now rather than when the
// server finds it inactive.
func deleteOrdered(js jetstream.JetStream, bucket string, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, "KV_"+bucket, info.Name) // else the server removes it when inactive
}
