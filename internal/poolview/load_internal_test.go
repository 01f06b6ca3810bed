package poolview

import (
	"testing"
	"time"
)

// A read of a pool's consumer taken while a call admitted here is still
// being published does not find that call: the call stays in what this
// replica admitted since the read, and the next call at the bound is
// refused (it was admitted, the read having forgotten the call).
func TestReadDuringAPublishKeepsTheCallCounted(t *testing.T) {
	v := &Load{cfg: LoadConfig{Refresh: time.Hour}}
	p := &poolLoad{name: "native", bound: 3}
	for range 3 {
		if te, _, _ := v.checkPool(p, 0); te != nil {
			t.Fatalf("refused below the bound: %s", te.Message)
		}
	}
	p.settle()
	p.settle() // two stored; the third's publish is not answered yet

	// The read: the consumer has the two stored calls.
	p.admittedAtRead.Store(p.published())
	p.pending.Store(0)
	p.ackPending.Store(2)
	p.readAt.Store(time.Now().UnixNano())

	if te, _, _ := v.checkPool(p, 0); te == nil {
		t.Fatal("a fourth call was admitted with three queued or running")
	}
	p.settle() // the third is stored; the next read finds it
	p.admittedAtRead.Store(p.published())
	p.ackPending.Store(3)
	if te, _, _ := v.checkPool(p, 0); te == nil {
		t.Fatal("a fourth call was admitted after the read found three")
	}
}
