package dashboard

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/dispatch"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// outcomes are the outcomes the calls page filters by.
var outcomes = []string{audit.OutcomePending, audit.OutcomeOK, audit.OutcomeError, audit.OutcomeCancelled, audit.OutcomeExpired,
	audit.OutcomeDeadLettered, audit.OutcomeRejected}

// holdLive counts a live stream against v's key; false when the key
// holds maxLiveStreamsPerKey already.
func (s *Server) holdLive(v *viewer) bool {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live[v.who()] >= maxLiveStreamsPerKey {
		return false
	}
	s.live[v.who()]++
	return true
}

// releaseLive ends what holdLive counted.
func (s *Server) releaseLive(v *viewer) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live[v.who()]--; s.live[v.who()] <= 0 {
		delete(s.live, v.who())
	}
}

// maxFilterBytes bounds each filter field.
const maxFilterBytes = 256

// queryOf reads the calls page's filters from the URL; a viewer without
// the installation scope sees their own tenant only, and one limited to
// its own agent's calls (viewer.Agent) those only, whatever the URL says.
func queryOf(r *http.Request, v *viewer) (callindex.Query, url.Values, error) {
	return queryFrom(r.URL.Query(), v)
}

// queryFrom is queryOf reading the filters from in (a URL's query, or a
// bulk cancel's form).
func queryFrom(in url.Values, v *viewer) (callindex.Query, url.Values, error) {
	for _, k := range []string{"tenant", "tool", "agent", "session", "outcome", "error_type", "since", "until", "q", "before", "rbefore", "limit"} {
		if len(strings.TrimSpace(in.Get(k))) > maxFilterBytes {
			return callindex.Query{}, in, fmt.Errorf("%s: longer than %d bytes (searches and filters are at most %d bytes; shorten it)", k, maxFilterBytes, maxFilterBytes)
		}
	}
	get := bounded(in.Get)
	q := callindex.Query{Tenant: get("tenant"), Tool: get("tool"), Agent: get("agent"), Session: get("session"),
		Outcome: get("outcome"), ErrorType: strings.TrimPrefix(strings.ToUpper(get("error_type")), "ERROR_TYPE_"), Text: get("q")}
	if t := v.Tenant(); t != "" {
		q.Tenant = t
	}
	if a := v.Agent(); a != "" {
		q.Agent = a
	}
	var err error
	now := time.Now()
	if q.Since, err = parseWhen(get("since"), now); err != nil {
		return q, in, fmt.Errorf("since: %w", err)
	}
	if q.Until, err = parseWhen(get("until"), now); err != nil {
		return q, in, fmt.Errorf("until: %w", err)
	}
	if b := get("before"); b != "" {
		if q.Before, err = strconv.ParseUint(b, 10, 64); err != nil {
			return q, in, errors.New("before: not a sequence")
		}
	}
	if n := get("limit"); n != "" {
		if q.Limit, err = strconv.Atoi(n); err != nil || q.Limit < 1 {
			return q, in, errors.New("limit: not a positive number")
		}
	}
	if q.Outcome != "" && !slices.Contains(outcomes, q.Outcome) {
		return q, in, fmt.Errorf("outcome: one of %s", strings.Join(outcomes, ", "))
	}
	out := url.Values{}
	for _, k := range []string{"tenant", "tool", "agent", "session", "outcome", "error_type", "since", "until", "q"} {
		if s := get(k); s != "" {
			out.Set(k, s)
		}
	}
	return q, out, nil
}

// bounded reads fields with get, spaces trimmed, cut to maxFilterBytes.
func bounded(get func(string) string) func(string) string {
	return func(k string) string {
		s := strings.TrimSpace(get(k))
		if len(s) > maxFilterBytes {
			s = s[:maxFilterBytes]
		}
		return s
	}
}

// parseWhen reads a time filter: RFC 3339, a browser's datetime-local
// (UTC), or a duration back from now ("15m", "2h").
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New(`want RFC 3339, "2006-01-02T15:04" (UTC) or a duration such as "1h"`)
}

type callsData struct {
	Filters  url.Values
	Query    callindex.Query
	Calls    []callindex.Entry
	Next     callindex.Cursor
	Matched  int
	Error    string
	Outcomes []string
	Stats    callindex.Stats
	Live     bool
	Took     time.Duration
	MaxBulk  int // the most calls a bulk cancel takes
}

// callsPage lists calls, newest first, with the filters of the URL.
func (s *Server) callsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	start := time.Now()
	q, filters, err := queryOf(r, v)
	c := callindex.Cursor{Calls: q.Before}
	if b := r.URL.Query().Get("rbefore"); b != "" && err == nil {
		if c.Refused, err = strconv.ParseUint(b, 10, 64); err != nil {
			err = errors.New("rbefore: not a sequence")
		}
	}
	d := callsData{Filters: filters, Query: q, Outcomes: outcomes, Stats: s.index.Stats(), Live: c.IsZero() && q.Text == "", MaxBulk: maxBulk}
	status := http.StatusOK
	if err != nil {
		// No live stream under an error: it would fill the table with
		// every new call, unfiltered, as if they matched.
		d.Error, d.Live, status = err.Error(), false, http.StatusBadRequest
	} else {
		d.Calls, d.Next, d.Matched = s.index.List(q, c)
	}
	d.Took = time.Since(start)
	s.render(w, r, status, "calls", v, "Calls", "calls", d)
}

// liveKeepAlive is how often a live stream without news sends a comment
// (proxies close idle streams) and checks that its session still holds.
const liveKeepAlive = 15 * time.Second

// maxLiveStreamsPerKey bounds the live streams one key (its tenant/agent)
// holds open, so that no key takes every one of the index's subscriptions
// (callindex.MaxSubscribers, shared by every viewer).
const maxLiveStreamsPerKey = 16

// callsLive streams the calls the filters select as they are made and as
// they finish (server-sent events), until the client goes away, its
// session ends (expired, or its key no longer accepted: checked at each
// keep-alive) or the dashboard stops. The calls page's stream is batched
// (liveBatch): at most one "calls" event every liveFlushEvery, holding
// the newest update of each call, at most the page's limit of them; one
// call's page (?id=) gets a "call" event when that call changes. Each
// stream holds one of the index's subscriptions, which are capped, and
// one key holds at most maxLiveStreamsPerKey of them.
func (s *Server) callsLive(w http.ResponseWriter, r *http.Request, v *viewer) {
	q, _, err := queryOf(r, v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !s.holdLive(v) {
		http.Error(w, "too many live streams for this key", http.StatusTooManyRequests)
		return
	}
	defer s.releaseLive(v)
	ch, cancel, err := s.index.Subscribe()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	l := &liveStream{s: s, r: r, v: v, q: q, id: r.URL.Query().Get("id"), w: w, rc: http.NewResponseController(w)}
	_ = l.rc.Flush()
	l.run(ch)
}

// liveFlushEvery is how often the calls page's live stream sends what it
// has collected: at most 1/liveFlushEvery events a second a tab,
// whatever the call rate.
const liveFlushEvery = 250 * time.Millisecond

// liveStream is one live stream of callsLive.
type liveStream struct {
	s     *Server
	r     *http.Request
	v     *viewer
	q     callindex.Query
	id    string // one call's page: that call only, unbatched
	w     http.ResponseWriter
	rc    *http.ResponseController
	batch liveBatch
}

// run sends the updates of ch until the stream ends.
func (l *liveStream) run(ch <-chan callindex.Entry) {
	limit := l.q.Limit
	if limit <= 0 {
		limit = callindex.DefaultQueryLimit
	}
	l.batch = newLiveBatch(min(limit, callindex.MaxQueryLimit))
	tick := time.NewTicker(l.s.keepAlive)
	defer tick.Stop()
	flush := time.NewTicker(liveFlushEvery)
	defer flush.Stop()
	for {
		select {
		case <-l.r.Context().Done():
			return
		case <-l.s.done:
			return
		case <-tick.C:
			if l.s.viewerOf(l.r) == nil {
				return // the session expired, or its key was revoked
			}
			if !l.send(": keep-alive\n\n") {
				return
			}
		case <-flush.C:
			if !l.flush() {
				return
			}
		case e, ok := <-ch:
			if !ok {
				return
			}
			if (l.id != "" && e.ID != l.id) || (l.id == "" && !matches(l.q, e)) || !l.v.MaySee(e.Tenant, e.Agent) {
				continue
			}
			if l.id == "" {
				l.batch.add(e)
				continue
			}
			row, err := l.s.renderPartial("calls", "row", e)
			if err != nil || !l.send("event: call\ndata: "+sseData.Replace(row)+"\n\n") {
				return
			}
		}
	}
}

// sseData makes a rendered row one server-sent event data line: a line
// ends at "\n" or "\r" there, and html/template escapes neither (a name
// may hold a "\r"): "\n" is dropped, "\r" sent as its character
// reference.
var sseData = strings.NewReplacer("\r", "&#13;", "\n", "")

// flush sends the batch collected since the last one, if any, as one
// "calls" event (its rows oldest first, one a line); false when the
// stream is to end.
func (l *liveStream) flush() bool {
	es := l.batch.take()
	if len(es) == 0 {
		return true
	}
	var b strings.Builder
	b.WriteString("event: calls\n")
	for _, e := range es {
		row, err := l.s.renderPartial("calls", "row", e)
		if err != nil {
			l.s.log.Error("dashboard live row", "err", err)
			return false
		}
		b.WriteString("data: ")
		b.WriteString(sseData.Replace(row))
		b.WriteString("\n")
	}
	b.WriteString("\n")
	return l.send(b.String())
}

// send writes and flushes s; false when the client is gone.
func (l *liveStream) send(s string) bool {
	_, err := io.WriteString(l.w, s)
	return err == nil && l.rc.Flush() == nil
}

// liveBatch is what a live stream collects between two flushes: the
// newest update of each call, at most max calls (those updated last; the
// page keeps no more rows than that), in the order they were last
// updated.
type liveBatch struct {
	max   int
	seq   uint64
	calls map[string]batched
}

type batched struct {
	e   callindex.Entry
	seq uint64 // when it was last updated, in the batch's order
}

func newLiveBatch(n int) liveBatch {
	return liveBatch{max: n, calls: map[string]batched{}}
}

// add records an update; past 2*max calls the batch drops all but the
// max updated last, so that it holds O(max) whatever the call rate.
func (b *liveBatch) add(e callindex.Entry) {
	b.seq++
	b.calls[e.ID] = batched{e: e, seq: b.seq}
	if len(b.calls) > 2*b.max {
		b.trim()
	}
}

// trim keeps the max calls updated last.
func (b *liveBatch) trim() {
	if len(b.calls) <= b.max {
		return
	}
	seqs := make([]uint64, 0, len(b.calls))
	for _, c := range b.calls {
		seqs = append(seqs, c.seq)
	}
	slices.Sort(seqs)
	cut := seqs[len(seqs)-b.max]
	maps.DeleteFunc(b.calls, func(_ string, c batched) bool { return c.seq < cut })
}

// take returns the batch, oldest update first, and empties it.
func (b *liveBatch) take() []callindex.Entry {
	if len(b.calls) == 0 {
		return nil
	}
	b.trim()
	all := slices.SortedFunc(maps.Values(b.calls), func(x, y batched) int { return cmp.Compare(x.seq, y.seq) })
	out := make([]callindex.Entry, len(all))
	for i, c := range all {
		out[i] = c.e
	}
	clear(b.calls)
	return out
}

type callData struct {
	Entry   callindex.Entry
	Rec     *audit.Record
	Events  []*toolwirev1.CallEvent
	Result  *toolwirev1.ToolResponse
	Intents []intentView
	TraceID string
	// TraceURL is the trace in the tracing UI (Config.TraceURL).
	TraceURL string
	DLQSeq   uint64
	// Session is the call's session as the reference applier keeps it
	// (nil: the call names none, or it could not be read); SessionHref
	// its page.
	Session     *toolwirev1.Session
	SessionHref string
	// Delegation is the call's place in its delegation chain (nil: none,
	// or it could not be read).
	Delegation *delegationView
	Running    bool
	Done       string // what the last action did
	Args       string
	Struct     string
	// CopyJSON, CopyCommand and CopyCurl are the texts of the copy
	// buttons (copyTexts, curlText).
	CopyJSON, CopyCommand, CopyCurl string
}

type intentView struct {
	*toolwirev1.Intent
	Applied bool
}

// callSession is the session a call names (of tenant) as the reference
// applier keeps it, read as the viewer (nil: the call names none, or it
// could not be read), and the link to its page ("" for none).
func (s *Server) callSession(r *http.Request, v *viewer, tenant, session string) (*toolwirev1.Session, string) {
	if session == "" {
		return nil, ""
	}
	id := v.ID
	id.Tenant = tenant
	sess, err := s.cfg.Core.GetSession(r.Context(), id, session)
	if err != nil {
		sess = nil
	}
	return sess, sessionHref(tenant, session, v)
}

// callPage shows one call's timeline.
func (s *Server) callPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("id")
	e, ok := s.index.Get(id)
	if !ok && s.parkedPage(w, r, v, id) {
		return
	}
	if !ok || !v.MaySee(e.Tenant, e.Agent) {
		s.render(w, r, http.StatusNotFound, "error", v, "Not found", "calls",
			errorData{Status: http.StatusNotFound, Message: fmt.Sprintf("no call %q among the newest calls this dashboard indexes", id)})
		return
	}
	if e.Refused() {
		s.refusedPage(w, r, v, e)
		return
	}
	rec, err := s.audit.One(r.Context(), e.Seq)
	if err != nil {
		s.render(w, r, http.StatusBadGateway, "error", v, "Unavailable", "calls", errorData{Status: http.StatusBadGateway, Message: "reading the call failed: " + err.Error()})
		return
	}
	if rec.Result != nil && e.Outcome == audit.OutcomePending {
		// The index learns of a result from its own consumer and may lag
		// the record just read: the page shows the outcome of the result
		// it shows.
		e.Outcome, e.ErrorType = rec.Outcome, rec.ErrorType
	}
	d := callData{Entry: e, Rec: rec, Running: rec.Result == nil, Done: doneMessage(r)}
	d.Session, d.SessionHref = s.callSession(r, v, rec.Tenant, rec.Session)
	d.Delegation = s.callDelegation(r, v, rec.Tenant, id)
	if len(rec.Arguments) > 0 {
		d.Args = prettyJSON(rec.Arguments)
	}
	d.CopyJSON, d.CopyCommand = copyTexts(rec)
	d.CopyCurl = curlText(rec)
	for _, raw := range rec.Events {
		ev := &toolwirev1.CallEvent{}
		if protojson.Unmarshal(raw, ev) == nil {
			d.Events = append(d.Events, ev)
		}
	}
	sortEvents(d.Events)
	d.Events = dropSeenPartial(d.Events)
	if len(rec.Response) > 0 {
		resp := &toolwirev1.ToolResponse{}
		if protojson.Unmarshal(rec.Response, resp) == nil { // the redacted response, never the stored one
			d.Result = resp
			if resp.StructuredJson != "" {
				d.Struct = prettyJSON([]byte(resp.StructuredJson))
			}
			d.Intents = intentsOf(d.Session, rec, resp)
		}
	}
	if tp := strings.Split(rec.Traceparent, "-"); len(tp) == 4 && traceIDRe.MatchString(tp[1]) {
		d.TraceID = tp[1]
		d.TraceURL = s.traceLink(d.TraceID)
	}
	if e.Outcome == audit.OutcomeDeadLettered {
		d.DLQSeq = s.letterOf(r, e)
	}
	s.render(w, r, http.StatusOK, "call", v, "Call "+id, "calls", d)
}

// dropSeenPartial drops the chunks of partial output already shown
// (dispatch.PartialSeen): a signed chunk stored again is shown once.
func dropSeenPartial(events []*toolwirev1.CallEvent) []*toolwirev1.CallEvent {
	var seen dispatch.PartialSeen
	return slices.DeleteFunc(events, seen.Seen)
}

// sortEvents orders a call's events by the times they were recorded at
// (stable: an event without a time keeps its place after the one before
// it). Stream order is not the order events happened in: a dispatcher's
// ACCEPTED is a core publish, stored after the call, and may land after a
// fast worker's STARTED.
func sortEvents(evs []*toolwirev1.CallEvent) {
	type timed struct {
		ev *toolwirev1.CallEvent
		at time.Time
	}
	ts := make([]timed, len(evs))
	var last time.Time
	for i, ev := range evs {
		if ev.GetTime() != nil {
			last = ev.GetTime().AsTime()
		}
		ts[i] = timed{ev: ev, at: last}
	}
	slices.SortStableFunc(ts, func(a, b timed) int { return a.at.Compare(b.at) })
	// ACCEPTED comes before every worker's event whatever the hosts'
	// clocks say (it is the dispatcher's; STARTED, PROGRESS, RETRYING and
	// FINISHED the workers'), and keeps its place among the dispatcher's
	// own (a parked call: AWAITING_APPROVAL, APPROVED, then ACCEPTED).
	acc := slices.IndexFunc(ts, func(x timed) bool { return x.ev.GetType() == toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED })
	first := slices.IndexFunc(ts, func(x timed) bool { return workerEvent(x.ev.GetType()) })
	if acc > 0 && first >= 0 && first < acc {
		a := ts[acc]
		copy(ts[first+1:acc+1], ts[first:acc])
		ts[first] = a
	}
	for i := range ts {
		evs[i] = ts[i].ev
	}
}

// workerEvent reports whether events of type t are written by a worker.
func workerEvent(t toolwirev1.CallEventType) bool {
	switch t {
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS,
		toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED:
		return true
	}
	return false
}

// intentsOf is the response's intents, each with whether the call's
// session (sess; nil: none or unread) has applied it.
func intentsOf(sess *toolwirev1.Session, rec *audit.Record, resp *toolwirev1.ToolResponse) []intentView {
	if len(resp.Intents) == 0 {
		return nil
	}
	applied := map[string]bool{}
	for _, a := range sess.GetApplied() {
		applied[a] = true
	}
	for _, a := range sess.GetLog() {
		applied[a.CallId+"/"+a.IntentId] = true
	}
	out := make([]intentView, 0, len(resp.Intents))
	for _, in := range resp.Intents {
		out = append(out, intentView{Intent: in, Applied: applied[rec.CallID+"/"+in.Id]})
	}
	return out
}

// letterOf finds the dead letter of a dead-lettered call (0: none found).
func (s *Server) letterOf(r *http.Request, e callindex.Entry) uint64 {
	ls, err := s.letters.list(r.Context())
	if err != nil {
		return 0
	}
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i].Record.GetCall().GetCallId() == e.ID {
			return ls[i].Seq
		}
	}
	return 0
}

// cancelCall cancels a running (or parked) call, as its tenant, naming
// who asked in the cancel's record.
func (s *Server) cancelCall(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("id")
	e, ok := s.index.Get(id)
	if !ok || !v.MaySee(e.Tenant, e.Agent) {
		s.refuse(w, r, v, http.StatusNotFound, "no such call")
		return
	}
	as := v.ID
	as.Tenant = e.Tenant
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if len(reason) > 500 {
		reason = reason[:500]
	}
	if reason != "" {
		reason = "cancelled from the dashboard by " + v.who() + ": " + reason
	} else {
		reason = "cancelled from the dashboard by " + v.who()
	}
	out, err := s.cfg.Core.Cancel(r.Context(), as, id, reason)
	if err != nil {
		s.refuse(w, r, v, http.StatusBadGateway, "cancel failed: "+err.Error())
		return
	}
	s.log.Info("dashboard cancel", "who", v.who(), "call", id, "outcome", out.String())
	http.Redirect(w, r, Prefix+"/calls/"+id+"?done="+url.QueryEscape(strings.ToLower(strings.TrimPrefix(out.String(), "CANCEL_OUTCOME_"))), http.StatusSeeOther)
}

// retryCall retries a dead-lettered call from its dead letter: a new
// call, whose admission record names who asked.
func (s *Server) retryCall(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("id")
	e, ok := s.index.Get(id)
	if !ok || !v.MaySee(e.Tenant, e.Agent) {
		s.refuse(w, r, v, http.StatusNotFound, "no such call")
		return
	}
	seq := s.letterOf(r, e)
	if seq == 0 {
		s.refuse(w, r, v, http.StatusConflict, "this call has no dead letter to retry (only dead-lettered calls are retried from here)")
		return
	}
	call, err := s.dlq.RetryBy(r.Context(), seq, v.who()+" (dashboard)")
	if call == nil {
		s.refuseRetry(w, r, v, err)
		return
	}
	s.log.Info("dashboard retry", "who", v.who(), "call", id, "dead_letter", seq, "new_call", call.CallId)
	http.Redirect(w, r, Prefix+"/calls/"+call.CallId, http.StatusSeeOther)
}

// matches says whether a live update e belongs on a page of q (its text
// filter aside: a page with one is not live).
func matches(q callindex.Query, e callindex.Entry) bool {
	eq := func(f, v string) bool { return f == "" || f == v }
	return eq(q.Tenant, e.Tenant) && eq(q.Tool, e.Tool) && eq(q.Agent, e.Agent) && eq(q.Session, e.Session) &&
		eq(q.Outcome, e.Outcome) && eq(q.ErrorType, e.ErrorType) &&
		(q.Since.IsZero() || !e.Time.Before(q.Since)) && (q.Until.IsZero() || !e.Time.After(q.Until))
}

// traceIDRe is a W3C trace id.
var traceIDRe = regexp.MustCompile(`^[0-9a-f]{32}$`)
