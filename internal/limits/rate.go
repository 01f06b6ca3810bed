package limits

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Rate is a GCRA rate limit: on average Count units per Per, and at most
// Burst units at once after an idle spell. Over any interval t, a key
// admits at most Burst + Count×t/Per units.
type Rate struct {
	// Count is the units per Per. At least 1.
	Count int64
	// Per is the period of Count: at least 1 ms, at most 366 days.
	Per time.Duration
	// Burst is the units admitted at once; at least 1 and at most
	// MaxBurst. 1 spaces calls evenly at Per/Count.
	Burst int64
}

// MaxBurst bounds Rate.Burst and a cost.
const MaxBurst = 1 << 30

// maxHorizon bounds how far ahead of now a state may reach: a burst's
// span (Burst×Per/Count), a budget window, a lease, a loop-guard window.
const maxHorizon = 366 * 24 * time.Hour

func (r Rate) validate(cost int64) error {
	switch {
	case r.Count < 1 || r.Count > MaxBurst:
		return fmt.Errorf("%w: rate count %d not in 1..%d", ErrInvalid, r.Count, MaxBurst)
	case r.Per < time.Millisecond || r.Per > maxHorizon:
		return fmt.Errorf("%w: rate period %s not in 1ms..366d", ErrInvalid, r.Per)
	case r.Burst < 1 || r.Burst > MaxBurst:
		return fmt.Errorf("%w: burst %d not in 1..%d", ErrInvalid, r.Burst, MaxBurst)
	case cost < 1:
		return fmt.Errorf("%w: cost %d < 1", ErrInvalid, cost)
	case cost > r.Burst:
		return fmt.Errorf("%w: cost %d above the burst %d: never admitted", ErrInvalid, cost, r.Burst)
	case float64(r.Burst)*r.emission() > float64(maxHorizon):
		return fmt.Errorf("%w: a burst of %d at %d per %s spans more than %s", ErrInvalid, r.Burst, r.Count, r.Per, maxHorizon)
	}
	return nil
}

// emission is the time one unit occupies, in nanoseconds.
func (r Rate) emission() float64 { return float64(r.Per) / float64(r.Count) }

// Allow admits cost units under rate r on key, at now, or says after how
// long they would be admitted if nothing else were. A refusal writes
// nothing. The state of a key is its theoretical arrival time (TAT); the
// key expires on its own once the TAT has passed.
//
// Errors: ErrInvalid (key, rate, cost > burst), ErrContention, ErrCorrupt,
// ErrClosed, and the context's or the server's errors; on an error nothing
// was admitted (unless the context ended while the request was being
// written: see Store).
func (s *Store) Allow(ctx context.Context, key Key, r Rate, cost int64, now time.Time) (allowed bool, retryAfter time.Duration, err error) {
	if err := r.validate(cost); err != nil {
		return false, 0, err
	}
	k, err := key.bucketKey(kindRate)
	if err != nil {
		return false, 0, err
	}
	t := &allowTxn{
		now: now.UnixNano(),
		inc: int64(math.Ceil(float64(cost) * r.emission())),
		tau: int64(math.Floor(float64(r.Burst) * r.emission())),
	}
	if err := s.do(ctx, k, newRateState, t); err != nil {
		return false, 0, err
	}
	return t.allowed, time.Duration(t.retryAfter), nil
}

// allowTxn is one Allow: cost×emission rounded up (inc), the burst
// tolerance Burst×emission rounded down (tau); both roundings make the
// limit admit less, never more.
type allowTxn struct {
	now, inc, tau int64
	allowed       bool
	retryAfter    int64
}

func (t *allowTxn) apply(s state) bool {
	st := s.(*rateState)
	tat := max(st.tat, t.now)
	next := tat + t.inc
	if excess := next - t.now - t.tau; excess > 0 {
		t.allowed, t.retryAfter = false, excess
		return false
	}
	t.allowed, t.retryAfter = true, 0
	st.tat = next
	st.now = max(st.now, t.now)
	return true
}

// rateState is the value of a rate key: version 1, then the TAT in Unix
// nanoseconds, big-endian (9 bytes).
type rateState struct {
	tat int64
	now int64 // latest request's clock
}

func newRateState() state { return &rateState{} }

const rateVersion = 1

func (st *rateState) reset(data []byte) error {
	*st = rateState{}
	if data == nil {
		return nil
	}
	if len(data) != 9 || data[0] != rateVersion {
		return fmt.Errorf("rate value of %d bytes, version %d", len(data), versionOf(data))
	}
	st.tat = int64(binary.BigEndian.Uint64(data[1:]))
	return nil
}

func (st *rateState) marshal(dst []byte) []byte {
	dst = append(dst, rateVersion)
	return binary.BigEndian.AppendUint64(dst, uint64(st.tat))
}

func (st *rateState) ttl() time.Duration { return time.Duration(st.tat-st.now) + ttlSlack }

func versionOf(data []byte) int {
	if len(data) == 0 {
		return -1
	}
	return int(data[0])
}
