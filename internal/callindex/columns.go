package callindex

import (
	"time"

	"github.com/toolwire/toolwire/internal/audit"
)

// columns hold the calls, one slice per field, all indexed by ring slot.
type columns struct {
	seq     []uint64
	unix    []int64 // stored time, ns since the epoch
	id      [][16]byte
	tenant  []uint32 // symbols
	agent   []uint32
	session []uint32
	tool    []uint32
	worker  []uint32
	errType []uint32
	dur     []uint32 // encodeDuration
	outcome []uint8
	flags   []uint8
	text    []uint64 // arena reference
}

// slotBytes is the memory of one slot of the columns.
const slotBytes = 8 + 8 + 16 + 6*4 + 4 + 1 + 1 + 8

// resize gives every column the capacity c, keeping the first n slots.
func (c *columns) resize(n, capacity int) {
	c.seq = resized(c.seq, n, capacity)
	c.unix = resized(c.unix, n, capacity)
	c.id = resized(c.id, n, capacity)
	c.tenant = resized(c.tenant, n, capacity)
	c.agent = resized(c.agent, n, capacity)
	c.session = resized(c.session, n, capacity)
	c.tool = resized(c.tool, n, capacity)
	c.worker = resized(c.worker, n, capacity)
	c.errType = resized(c.errType, n, capacity)
	c.dur = resized(c.dur, n, capacity)
	c.outcome = resized(c.outcome, n, capacity)
	c.flags = resized(c.flags, n, capacity)
	c.text = resized(c.text, n, capacity)
}

func resized[T any](s []T, n, capacity int) []T {
	out := make([]T, n, capacity)
	copy(out, s[:n])
	return out
}

// slot is the ring slot of the k-th oldest call (0 <= k < n).
func (x *Index) slot(k int) int {
	i := x.head + k
	if i >= len(x.seq) {
		i -= len(x.seq)
	}
	return i
}

// newSlot returns the slot for a new call: a new one while the ring
// grows, else the oldest call's, which is evicted.
func (x *Index) newSlot() int {
	if x.n < x.max {
		if x.n == cap(x.seq) {
			x.resize(x.n, min(x.max, max(1024, 2*x.n)))
		}
		x.resize0()
		x.n++
		return x.n - 1
	}
	i := x.head
	x.evict(i)
	x.head++
	if x.head == len(x.seq) {
		x.head = 0
	}
	return i
}

// resize0 extends every column by one slot (within its capacity).
func (x *Index) resize0() {
	c := &x.columns
	n := len(c.seq) + 1
	c.seq, c.unix, c.id = c.seq[:n], c.unix[:n], c.id[:n]
	c.tenant, c.agent, c.session, c.tool = c.tenant[:n], c.agent[:n], c.session[:n], c.tool[:n]
	c.worker, c.errType, c.dur = c.worker[:n], c.errType[:n], c.dur[:n]
	c.outcome, c.flags, c.text = c.outcome[:n], c.flags[:n], c.text[:n]
	if 2*n > len(x.ids.slots) {
		x.ids.grow(n, x.id)
	}
}

// evict releases what slot i holds.
func (x *Index) evict(i int) {
	x.ids.remove(&x.id[i], x.id)
	for _, s := range []uint32{x.tenant[i], x.agent[i], x.session[i], x.tool[i], x.worker[i], x.errType[i]} {
		x.syms.unref(s)
	}
	x.arena.release(x.text[i])
}

// Outcome codes, stored as one byte a call.
const (
	ocPending uint8 = iota
	ocOK
	ocError
	ocCancelled
	ocExpired
	ocDeadLettered
	ocRejected              // a refusal (the refusals ring only)
	ocAny      uint8 = 0xff // in a filter: no outcome filter
)

var outcomeNames = [...]string{audit.OutcomePending, audit.OutcomeOK, audit.OutcomeError, audit.OutcomeCancelled,
	audit.OutcomeExpired, audit.OutcomeDeadLettered, audit.OutcomeRejected}

func outcomeCode(name string) (uint8, bool) {
	for i, n := range outcomeNames {
		if n == name {
			return uint8(i), true
		}
	}
	return 0, false
}

// flagSecrets: the call's result text must be redacted with secrets the
// feeder holds for it.
const flagSecrets uint8 = 1

// encodeDuration keeps d in 32 bits: microseconds below 2^31 of them
// (35 minutes), whole milliseconds with the top bit set above (up to
// 2^31-1 of them, 24 days).
func encodeDuration(d time.Duration) uint32 {
	switch us := d.Microseconds(); {
	case us <= 0:
		return 0
	case us < 1<<31:
		return uint32(us)
	default:
		return 1<<31 | uint32(min(d.Milliseconds(), 1<<31-1))
	}
}

func decodeDuration(v uint32) time.Duration {
	if v&(1<<31) != 0 {
		return time.Duration(v&^(1<<31)) * time.Millisecond
	}
	return time.Duration(v) * time.Microsecond
}
