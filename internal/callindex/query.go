package callindex

import (
	"bytes"
	"math"
	"sort"
	"strings"
	"time"
)

// Query selects calls. Zero fields match everything.
type Query struct {
	// Tenant, Tool, Agent and Session match exactly; Outcome is one of the
	// Entry outcomes; ErrorType matches case-insensitively, with or
	// without the ERROR_TYPE_ prefix.
	Tenant, Tool, Agent, Session, Outcome, ErrorType string
	// Since and Until bound the stored time, both included.
	Since, Until time.Time
	// Text is a case-insensitive substring of the call's search text
	// (redacted arguments and result text; see the package notes).
	Text string
	// Before is a cursor: only calls with Seq < Before (0 = newest).
	Before uint64
	// Limit is the page size: default DefaultQueryLimit, at most
	// MaxQueryLimit.
	Limit int
}

// filter is a Query resolved to symbols; a zero symbol does not filter.
type filter struct {
	tenant, agent, session, tool, errType uint32
	outcome                               uint8
	since, until, stop                    int64
	text                                  *needle
}

// needle is a text to search for, anchored at its byte that is rarest in
// the indexed texts: a text is looked at only where that byte occurs
// (one vectorised IndexByte per text for a rare needle).
type needle struct {
	s      []byte
	anchor byte
	at     int // position of anchor in s
}

func newNeedle(s []byte, freq *[256]uint64) *needle {
	n := &needle{s: s}
	for i, c := range s {
		if freq[c] < freq[n.anchor] || i == 0 {
			n.anchor, n.at = c, i
		}
	}
	return n
}

// in reports whether n occurs in t.
func (n *needle) in(t []byte) bool {
	for off := 0; ; {
		j := bytes.IndexByte(t[off:], n.anchor)
		if j < 0 {
			return false
		}
		start := off + j - n.at
		if start >= 0 && start+len(n.s) <= len(t) && bytes.Equal(t[start:start+len(n.s)], n.s) {
			return true
		}
		off += j + 1
	}
}

// Query returns a page of the calls q selects, newest first, the cursor
// of the next page (0 when there is none) and how many calls match at or
// below the cursor: exact when q only has a cursor, otherwise counted up
// to MatchedCap (a count of MatchedCap means "at least").
func (x *Index) Query(q Query) (page []Entry, next uint64, matched int) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultQueryLimit
	}
	limit = min(limit, MaxQueryLimit)
	f := filter{outcome: ocAny, since: math.MinInt64, until: math.MaxInt64, stop: math.MinInt64}
	var text []byte
	if q.Text != "" {
		text = lower(nil, []byte(q.Text), math.MaxInt)
		if len(text) > searchTextMax || bytes.IndexByte(text, textSep) >= 0 {
			return nil, 0, 0
		}
	}
	if q.Outcome != "" {
		oc, ok := outcomeCode(q.Outcome)
		if !ok {
			return nil, 0, 0
		}
		f.outcome = oc
	}
	if !q.Since.IsZero() {
		f.since, f.stop = q.Since.UnixNano(), q.Since.Add(-TimeSlack).UnixNano()
	}
	if !q.Until.IsZero() {
		f.until = q.Until.UnixNano()
	}
	errType := strings.TrimPrefix(strings.ToUpper(q.ErrorType), "ERROR_TYPE_")

	x.mu.RLock()
	defer x.mu.RUnlock()
	if text != nil {
		f.text = newNeedle(text, &x.arena.freq)
	}
	for _, s := range []struct {
		dst  *uint32
		name string
	}{{&f.tenant, q.Tenant}, {&f.agent, q.Agent}, {&f.session, q.Session}, {&f.tool, q.Tool}, {&f.errType, errType}} {
		if s.name == "" {
			continue
		}
		sym, ok := x.syms.ids[s.name]
		if !ok {
			return nil, 0, 0 // no call has it
		}
		*s.dst = sym
	}
	hi := x.n // calls [0, hi) (oldest first) are below the cursor
	if q.Before != 0 {
		hi = sort.Search(x.n, func(k int) bool { return x.seq[x.slot(k)] >= q.Before })
	}
	if !q.Until.IsZero() {
		u := q.Until.Add(TimeSlack).UnixNano()
		hi = sort.Search(hi, func(k int) bool { return x.unix[x.slot(k)] > u })
	}
	if f.text == nil && f.outcome == ocAny && f.tenant|f.agent|f.session|f.tool|f.errType == 0 && q.Since.IsZero() && q.Until.IsZero() {
		for k := hi - 1; k >= 0 && len(page) < limit; k-- {
			page = append(page, x.entry(x.slot(k)))
		}
		if hi > len(page) {
			next = page[len(page)-1].Seq
		}
		return page, next, hi
	}
	st := scanState{limit: limit, page: make([]Entry, 0, min(limit, 64))}
	// The ring's calls [0, hi) in at most two runs of slots.
	a, b := x.head, x.head+hi
	if b > len(x.seq) {
		if !x.scan(0, b-len(x.seq), &f, &st) {
			x.scan(a, len(x.seq), &f, &st)
		}
	} else {
		x.scan(a, b, &f, &st)
	}
	if st.matched > len(st.page) {
		next = st.page[len(st.page)-1].Seq
	}
	return st.page, next, st.matched
}

type scanState struct {
	page    []Entry
	limit   int
	matched int
}

// scan matches the slots [a, b) newest first and reports whether the
// query is done (MatchedCap reached, or past Since).
func (x *Index) scan(a, b int, f *filter, st *scanState) bool {
	tenant, agent, session, tool, errType := x.tenant[:b], x.agent[:b], x.session[:b], x.tool[:b], x.errType[:b]
	outcome, unix, text := x.outcome[:b], x.unix[:b], x.text[:b]
	for i := b - 1; i >= a; i-- {
		if (f.tool != 0 && tool[i] != f.tool) || (f.tenant != 0 && tenant[i] != f.tenant) ||
			(f.outcome != ocAny && outcome[i] != f.outcome) || (f.errType != 0 && errType[i] != f.errType) ||
			(f.agent != 0 && agent[i] != f.agent) || (f.session != 0 && session[i] != f.session) {
			continue
		}
		if t := unix[i]; t < f.since || t > f.until {
			if t < f.stop {
				return true
			}
			continue
		}
		if f.text != nil && !f.text.in(x.arena.get(text[i])) {
			continue
		}
		st.matched++
		if len(st.page) < st.limit {
			st.page = append(st.page, x.entry(i))
		} else if st.matched >= MatchedCap {
			return true
		}
	}
	return false
}
