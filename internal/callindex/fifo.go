package callindex

// fifo is a map bounded to n entries and to a total weight (bytes held)
// of maxW: the oldest go when a new one comes.
type fifo[V any] struct {
	m     map[[16]byte]fifoItem[V]
	order [][16]byte
	gen   []uint64
	next  uint64
	n     int
	w     int // the weight of the entries in m
	maxW  int
}

type fifoItem[V any] struct {
	v   V
	gen uint64
	w   int
}

func newFIFO[V any](n, maxW int) *fifo[V] {
	return &fifo[V]{m: map[[16]byte]fifoItem[V]{}, n: n, maxW: maxW}
}

// put adds v under k with weight w (an entry heavier than the whole
// budget is not kept).
func (f *fifo[V]) put(k [16]byte, v V, w int) {
	if w > f.maxW {
		return
	}
	if old, ok := f.m[k]; ok {
		delete(f.m, k)
		f.w -= old.w
	}
	for (len(f.m) >= f.n || f.w+w > f.maxW) && len(f.order) > 0 {
		k0, g0 := f.order[0], f.gen[0]
		f.order, f.gen = f.order[1:], f.gen[1:]
		if it, ok := f.m[k0]; ok && it.gen == g0 {
			delete(f.m, k0)
			f.w -= it.w
		}
	}
	f.next++
	f.m[k] = fifoItem[V]{v: v, gen: f.next, w: w}
	f.w += w
	f.order, f.gen = append(f.order, k), append(f.gen, f.next)
	if len(f.order) > 2*f.n+64 { // drop the keys taken meanwhile
		order, gen := make([][16]byte, 0, len(f.m)), make([]uint64, 0, len(f.m))
		for i, k := range f.order {
			if it, ok := f.m[k]; ok && it.gen == f.gen[i] {
				order, gen = append(order, k), append(gen, f.gen[i])
			}
		}
		f.order, f.gen = order, gen
	}
}

func (f *fifo[V]) take(k [16]byte) (V, bool) {
	it, ok := f.m[k]
	if ok {
		delete(f.m, k)
		f.w -= it.w
	}
	return it.v, ok
}
