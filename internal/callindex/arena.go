package callindex

import "slices"

// arena holds the search texts in slabs of slabSize bytes. A reference is
// slab number << 28 | offset << 8 | length; 0 is no text.
type arena struct {
	slabs [][]byte // slab base+i; nil once released
	live  []int32  // texts in each slab
	base  uint64
	// freq counts the bytes of every text put (never decreased: an
	// approximation that only chooses where search looks first).
	freq [256]uint64
}

func (a *arena) put(t []byte) uint64 {
	if len(t) == 0 {
		return 0
	}
	last := len(a.slabs) - 1
	if last < 0 || len(a.slabs[last])+len(t) > slabSize {
		if len(a.slabs) == 0 {
			a.base = max(a.base, 1) // slab 0 would make the reference 0 ambiguous
		}
		a.slabs, a.live = append(a.slabs, make([]byte, 0, slabSize)), append(a.live, 0)
		if last >= 0 && a.live[last] == 0 { // its texts went while it was filled
			a.free(last)
		}
		last = len(a.slabs) - 1
	}
	off := len(a.slabs[last])
	a.slabs[last] = append(a.slabs[last], t...)
	for _, c := range t {
		a.freq[c]++
	}
	a.live[last]++
	return (a.base+uint64(last))<<28 | uint64(off)<<8 | uint64(len(t))
}

func (a *arena) get(ref uint64) []byte {
	if ref == 0 {
		return nil
	}
	off := int(ref >> 8 & (slabSize - 1))
	return a.slabs[ref>>28-a.base][off : off+int(ref&0xff)]
}

// release drops a reference; a slab with no text left is freed, unless it
// is the one being filled (then put frees it when it starts the next).
func (a *arena) release(ref uint64) {
	if ref == 0 {
		return
	}
	i := int(ref>>28 - a.base)
	if a.live[i]--; a.live[i] > 0 || i == len(a.slabs)-1 {
		return
	}
	a.free(i)
}

// free frees slab i, which holds no text, and forgets the freed slabs
// before the first one kept.
func (a *arena) free(i int) {
	a.slabs[i] = nil
	n := 0
	for n < len(a.slabs)-1 && a.slabs[n] == nil {
		n++
	}
	if n > 0 {
		a.slabs, a.live, a.base = slices.Clone(a.slabs[n:]), slices.Clone(a.live[n:]), a.base+uint64(n)
	}
}

func (a *arena) bytes() int64 {
	n := int64(0)
	for _, s := range a.slabs {
		n += int64(cap(s))
	}
	return n + int64(cap(a.slabs))*24 + int64(cap(a.live))*4
}
