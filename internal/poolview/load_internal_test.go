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

// Peek gives the answer Check would give and counts nothing: at the
// bound it refuses as Check does, below it it admits without taking the
// pool's last place, which Check then takes.
func TestPeekCountsNothing(t *testing.T) {
	p := &poolLoad{name: "native", bound: 2}
	v := &Load{cfg: LoadConfig{Refresh: time.Hour}}
	v.snap.Store(&loadSnap{pools: []poolRoute{{p, []string{"calls.>"}}}, routes: &routeCache{}})
	r := Request{Subject: "calls.native.echo"}
	p.ackPending.Store(1) // the last read: one running
	p.readAt.Store(time.Now().UnixNano())
	for range 3 {
		if te, _, _ := v.Peek(t.Context(), r); te != nil {
			t.Fatalf("refused below the bound: %s", te.Message)
		}
	}
	if p.admitted.Load() != 0 || p.unsettled.Load() != 0 {
		t.Fatal("Peek counted a call")
	}
	a, te, _, _ := v.Check(t.Context(), r)
	if te != nil {
		t.Fatalf("Check refused the pool's last place: %s", te.Message)
	}
	a.Settle()
	p.admittedAtRead.Store(p.published()) // a read finds both
	p.ackPending.Store(2)
	te, cause, target := v.Peek(t.Context(), r)
	if te == nil || cause != "backlog" || target != "native" {
		t.Fatalf("at the bound: %v %q %q", te, cause, target)
	}
}
