package maintenance

import (
	"container/heap"
	"sync"
	"time"
)

// tracked is an accepted call the overdue sweeper follows: what its
// admission record said, and when it is looked at next.
type tracked struct {
	due        time.Time // when it is looked at next
	callID     string
	tenant     string
	dispatcher string // the dispatcher token of the call's subjects
	tool       string
	session    string
	spec       string    // the spec version admitted; "" = unknown
	accepted   time.Time // when it was admitted (queued, for an approved call)
	deadline   time.Time // its schedule-to-close deadline; zero = none
	failures   uint64    // looks at it that failed so far
	index      int       // in the heap
	// resultFirst is when it falls due (zero = looked at when due): a
	// result was read before its record, so its first look, at once,
	// only sees whether that result is believed, and tracks it until
	// resultFirst if not.
	resultFirst time.Time
}

// tracker is the overdue sweeper's bounded set of calls, ordered by due
// time (a min-heap), with an index by call id so that a stored result
// drops its call. Safe for concurrent use: the consumers add and drop,
// the sweeping goroutine takes what is due.
type tracker struct {
	mu      sync.Mutex
	h       dueHeap
	byID    map[string]*tracked
	max     int
	dropped uint64
	wake    chan struct{} // signalled when the earliest due time moves up
	// early are the calls whose result was read before their record, the
	// last earlyResults of them (a ring, and its index by call id).
	early    [earlyResults]string
	earlyAt  int
	earlySet map[string]int // call id → its slot in early
}

// earlyResults is how many results of calls not followed (yet) the
// tracker remembers: the two consumers' lag behind each other, in calls.
const earlyResults = 4096

func newTracker(max int) *tracker {
	return &tracker{byID: map[string]*tracked{}, max: max, wake: make(chan struct{}, 1), earlySet: map[string]int{}}
}

// add tracks c unless it is tracked already or the tracker is full: then it is dropped and counted, and add returns the
// count of drops so far (0 when c was tracked or needed no tracking).
func (t *tracker) add(c *tracked) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byID[c.callID]; ok {
		return 0
	}
	// A call whose result came before its admission record is followed
	// all the same: that result was not checked (onResult checks only
	// followed calls' results), and its look finds it if it is believed.
	if len(t.h) >= t.max {
		t.dropped++
		return t.dropped
	}
	if _, ok := t.earlySet[c.callID]; ok {
		delete(t.earlySet, c.callID) // its slot is overwritten in turn
		c.resultFirst, c.due = c.due, time.Now()
	}
	t.push(c)
	return 0
}

// again tracks c once more, whatever the bound: a call that could not be
// looked at is never dropped.
func (t *tracker) again(c *tracked) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byID[c.callID]; !ok {
		t.push(c)
	}
}

func (t *tracker) push(c *tracked) {
	heap.Push(&t.h, c)
	t.byID[c.callID] = c
	if c.index == 0 {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// answer drops the call callID, which has a believed result.
func (t *tracker) answer(callID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.byID[callID]; ok {
		heap.Remove(&t.h, c.index)
		delete(t.byID, callID)
	}
}

// toolOrRemember returns the tool of callID when it is followed; else it
// remembers that a result of it was read (unchecked: its tool, which says
// whose key may sign it, is in the record not read yet), so that its
// record, if it comes while remembered, is looked at at once (add), not
// when it falls due. One lock: a record added between the two would
// otherwise leave the result neither checked nor remembered.
func (t *tracker) toolOrRemember(callID string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.byID[callID]; ok {
		return c.tool, true
	}
	if _, ok := t.earlySet[callID]; ok {
		return "", false
	}
	if old := t.early[t.earlyAt]; old != "" && t.earlySet[old] == t.earlyAt {
		delete(t.earlySet, old)
	}
	t.early[t.earlyAt] = callID
	t.earlySet[callID] = t.earlyAt
	t.earlyAt = (t.earlyAt + 1) % earlyResults
	return "", false
}

// due removes and returns up to n calls due at now, earliest first, and
// when the next one is due (zero when none is tracked).
func (t *tracker) due(now time.Time, n int) ([]*tracked, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*tracked
	for len(t.h) > 0 && len(out) < n && !t.h[0].due.After(now) {
		c := heap.Pop(&t.h).(*tracked)
		delete(t.byID, c.callID)
		out = append(out, c)
	}
	if len(t.h) == 0 {
		return out, time.Time{}
	}
	return out, t.h[0].due
}

// stats returns how many calls are tracked and how many were dropped.
func (t *tracker) stats() (int, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.h), t.dropped
}

// dueHeap is a min-heap of tracked calls by due time (container/heap).
type dueHeap []*tracked

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *dueHeap) Push(x any) {
	c := x.(*tracked)
	c.index = len(*h)
	*h = append(*h, c)
}

func (h *dueHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return c
}
