package callindex

import "encoding/binary"

// idTable finds a call's slot by id: open addressing with linear probing
// over slot+1 (0 = empty), at most half full.
type idTable struct {
	slots []uint32
	mask  uint64
}

func hashID(id *[16]byte) uint64 {
	h := binary.LittleEndian.Uint64(id[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(id[8:])
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>29
}

// find returns the slot of id, or -1.
func (t *idTable) find(id *[16]byte, ids [][16]byte) int {
	if len(t.slots) == 0 {
		return -1
	}
	for p := hashID(id) & t.mask; ; p = (p + 1) & t.mask {
		s := t.slots[p]
		if s == 0 {
			return -1
		}
		if ids[s-1] == *id {
			return int(s - 1)
		}
	}
}

func (t *idTable) insert(id *[16]byte, slot int) {
	p := hashID(id) & t.mask
	for t.slots[p] != 0 {
		p = (p + 1) & t.mask
	}
	t.slots[p] = uint32(slot + 1)
}

// remove deletes id, shifting back the entries that probed past it.
func (t *idTable) remove(id *[16]byte, ids [][16]byte) {
	p := hashID(id) & t.mask
	for {
		s := t.slots[p]
		if s == 0 {
			return
		}
		if ids[s-1] == *id {
			break
		}
		p = (p + 1) & t.mask
	}
	for q := p; ; {
		q = (q + 1) & t.mask
		s := t.slots[q]
		if s == 0 {
			break
		}
		home := hashID(&ids[s-1]) & t.mask
		// The entry at q stays when its home lies cyclically in (p, q].
		if (p < q && p < home && home <= q) || (p > q && (home > p || home <= q)) {
			continue
		}
		t.slots[p] = s
		p = q
	}
	t.slots[p] = 0
}

// grow makes room for at least n ids (the slots [0, n) of ids, all live
// but the last, which is being filled).
func (t *idTable) grow(n int, ids [][16]byte) {
	size := 1024
	for size < 2*n {
		size *= 2
	}
	old := t.slots
	t.slots, t.mask = make([]uint32, size), uint64(size-1)
	for _, s := range old {
		if s != 0 {
			t.insert(&ids[s-1], int(s-1))
		}
	}
}
