package limits

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
)

// Budget is units per fixed window: windows of length Window aligned on
// the Unix epoch (UTC), so a 24 h budget resets at midnight UTC and a 1 h
// one on the hour. Every window starts from zero.
type Budget struct {
	// Limit is the units a window admits. At least 1.
	Limit int64
	// Window is the window's length: whole seconds, 1 s to 366 days.
	Window time.Duration
}

// MaxUnits bounds a budget's limit and a spend.
const MaxUnits = 1 << 62

func (b Budget) validate() error {
	switch {
	case b.Limit < 1 || b.Limit > MaxUnits:
		return fmt.Errorf("%w: budget limit %d not in 1..2^62", ErrInvalid, b.Limit)
	case b.Window < time.Second || b.Window > maxHorizon || b.Window%time.Second != 0:
		return fmt.Errorf("%w: budget window %s is not whole seconds in 1s..366d", ErrInvalid, b.Window)
	}
	return nil
}

// window returns the start and end of the window holding now.
func (b Budget) window(now time.Time) (start, end time.Time) {
	w := int64(b.Window)
	n := now.UnixNano()
	s := n - n%w
	if n%w < 0 {
		s -= w
	}
	return time.Unix(0, s).UTC(), time.Unix(0, s+w).UTC()
}

// Usage is what a budget's current window has spent.
type Usage struct {
	// Used is the units spent in the window.
	Used int64
	// Limit is the budget's limit.
	Limit int64
	// Remaining is Limit − Used, never below 0.
	Remaining int64
	// Start and ResetAt bound the window: at ResetAt a new one starts
	// from zero.
	Start, ResetAt time.Time
}

func usage(b Budget, used int64, start, end time.Time) Usage {
	return Usage{Used: used, Limit: b.Limit, Remaining: max(b.Limit-used, 0), Start: start, ResetAt: end}
}

// Spend spends units of budget b on key in the window holding now, if
// they fit whole: allowed is false, and nothing is spent, when used+units
// would pass the limit (a spend that does not fit is never cut down to
// what remains). u is the window's usage after the spend (or without it).
// Across any number of replicas a window admits at most Limit units, and
// with unit spends exactly Limit of them while callers keep asking.
//
// Errors: ErrInvalid (key, budget, units not in 1..MaxUnits),
// ErrContention, ErrCorrupt, ErrClosed, the context's and the server's.
func (s *Store) Spend(ctx context.Context, key Key, units int64, b Budget, now time.Time) (allowed bool, u Usage, err error) {
	if err := b.validate(); err != nil {
		return false, Usage{}, err
	}
	if units < 1 || units > MaxUnits {
		return false, Usage{}, fmt.Errorf("%w: spend of %d units not in 1..2^62", ErrInvalid, units)
	}
	k, err := key.bucketKey(kindBudget)
	if err != nil {
		return false, Usage{}, err
	}
	start, end := b.window(now)
	t := &spendTxn{units: units, limit: b.Limit, now: now.UnixNano(), end: end.UnixNano()}
	if err := s.do(ctx, windowKey(k, start.Unix()), newBudgetState, t); err != nil {
		return false, Usage{}, err
	}
	return t.allowed, usage(b, t.used, start, end), nil
}

// Usage returns the usage of budget b on key in the window holding now. It
// reads a replica's copy: on a replicated bucket it may lag the leader by
// the replication delay.
func (s *Store) Usage(ctx context.Context, key Key, b Budget, now time.Time) (Usage, error) {
	if err := b.validate(); err != nil {
		return Usage{}, err
	}
	k, err := key.bucketKey(kindBudget)
	if err != nil {
		return Usage{}, err
	}
	start, end := b.window(now)
	var st budgetState
	if err := s.load(ctx, windowKey(k, start.Unix()), &st); err != nil {
		return Usage{}, err
	}
	return usage(b, st.used, start, end), nil
}

// Refund gives back units that Spend admitted at spentAt (it finds the
// same window) and returns the window's usage: for a call that was
// admitted but never queued. The usage never drops below zero. Refund only
// what an allowed Spend spent, once: a refund of anything else hands
// another caller's units to the next spender.
func (s *Store) Refund(ctx context.Context, key Key, units int64, b Budget, spentAt time.Time) (Usage, error) {
	if err := b.validate(); err != nil {
		return Usage{}, err
	}
	if units < 1 || units > MaxUnits {
		return Usage{}, fmt.Errorf("%w: refund of %d units not in 1..2^62", ErrInvalid, units)
	}
	k, err := key.bucketKey(kindBudget)
	if err != nil {
		return Usage{}, err
	}
	start, end := b.window(spentAt)
	t := &refundTxn{units: units, now: time.Now().UnixNano(), end: end.UnixNano()}
	if err := s.do(ctx, windowKey(k, start.Unix()), newBudgetState, t); err != nil {
		return Usage{}, err
	}
	return usage(b, t.used, start, end), nil
}

type refundTxn struct {
	units, now, end int64
	used            int64
}

func (t *refundTxn) apply(s state) bool {
	st := s.(*budgetState)
	if st.used == 0 {
		t.used = 0
		return false
	}
	st.now, st.end = max(st.now, t.now), max(st.end, t.end)
	st.used = max(st.used-t.units, 0)
	t.used = st.used
	return true
}

type spendTxn struct {
	units, limit, now, end int64
	allowed                bool
	used                   int64
}

func (t *spendTxn) apply(s state) bool {
	st := s.(*budgetState)
	st.now, st.end = max(st.now, t.now), t.end
	if st.used > t.limit-t.units {
		t.allowed, t.used = false, st.used
		return false
	}
	st.used += t.units
	t.allowed, t.used = true, st.used
	return true
}

// budgetState is the value of one budget window's key: version 1, then
// the units used (big-endian int64).
type budgetState struct {
	used     int64
	now, end int64 // latest request's clock; the window's end
}

func newBudgetState() state { return &budgetState{} }

const budgetVersion = 1

func (st *budgetState) reset(data []byte) error {
	*st = budgetState{}
	if data == nil {
		return nil
	}
	if len(data) != 9 || data[0] != budgetVersion {
		return fmt.Errorf("budget value of %d bytes, version %d", len(data), versionOf(data))
	}
	st.used = int64(binary.BigEndian.Uint64(data[1:]))
	if st.used < 0 {
		return fmt.Errorf("budget value with %d units used", st.used)
	}
	return nil
}

func (st *budgetState) marshal(dst []byte) []byte {
	dst = append(dst, budgetVersion)
	return binary.BigEndian.AppendUint64(dst, uint64(st.used))
}

// ttl: until the window ends, and a minute more: a window's count must
// outlive the window by the clocks of every dispatcher, or a dispatcher
// whose clock runs behind would find it gone and start the window again.
func (st *budgetState) ttl() time.Duration {
	return time.Duration(st.end-st.now) + budgetSlack
}

const budgetSlack = time.Minute
