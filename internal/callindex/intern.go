package callindex

import "strings"

// symbols interns strings into uint32s with reference counts; 0 is "".
type symbols struct {
	ids   map[string]uint32
	names []string
	refs  []uint32
	free  []uint32
	size  int64 // bytes of the names
}

func newSymbols() symbols {
	return symbols{ids: map[string]uint32{}, names: []string{""}, refs: []uint32{0}}
}

func (s *symbols) ref(name string) uint32 {
	if name == "" {
		return 0
	}
	if id, ok := s.ids[name]; ok {
		s.refs[id]++
		return id
	}
	name = strings.Clone(name)
	var id uint32
	if n := len(s.free); n > 0 {
		id, s.free = s.free[n-1], s.free[:n-1]
		s.names[id], s.refs[id] = name, 1
	} else {
		id = uint32(len(s.names))
		s.names, s.refs = append(s.names, name), append(s.refs, 1)
	}
	s.ids[name] = id
	s.size += int64(len(name))
	return id
}

func (s *symbols) unref(id uint32) {
	if id == 0 {
		return
	}
	if s.refs[id]--; s.refs[id] == 0 {
		s.size -= int64(len(s.names[id]))
		delete(s.ids, s.names[id])
		s.names[id] = ""
		s.free = append(s.free, id)
	}
}

// bytes is the approximate memory of the symbols: names, the map (about
// 48 bytes an entry) and the slices.
func (s *symbols) bytes() int64 {
	return s.size + int64(len(s.ids))*48 + int64(cap(s.names))*16 + int64(cap(s.refs)+cap(s.free))*4
}
