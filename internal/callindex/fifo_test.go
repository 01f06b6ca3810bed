package callindex

import "testing"

// The bounded map holding secrets and orphan results keeps within its
// count and its byte budget, the oldest going first, and its weight
// follows takes and replacements.
func TestFIFOKeepsWithinCountAndBytes(t *testing.T) {
	f := newFIFO[int](3, 100)
	key := func(i byte) [16]byte { return [16]byte{i} }
	f.put(key(1), 1, 40)
	f.put(key(2), 2, 40)
	f.put(key(3), 3, 40) // 120 > 100: 1 goes
	if _, ok := f.take(key(1)); ok || f.w != 80 {
		t.Fatalf("the oldest was kept past the budget (weight %d)", f.w)
	}
	f.put(key(4), 4, 10)
	f.put(key(5), 5, 10) // 4 entries > 3: 2 goes
	if _, ok := f.take(key(2)); ok || len(f.m) != 3 || f.w != 60 {
		t.Fatalf("count bound: %d entries, weight %d", len(f.m), f.w)
	}
	f.put(key(3), 33, 5) // replaced: its old weight is given back
	if v, ok := f.take(key(3)); !ok || v != 33 || f.w != 20 {
		t.Fatalf("replacement: %v %v, weight %d", v, ok, f.w)
	}
	f.put(key(9), 9, 101) // heavier than the whole budget: not kept
	if _, ok := f.take(key(9)); ok || f.w != 20 {
		t.Fatalf("an entry over the budget was kept (weight %d)", f.w)
	}
}
