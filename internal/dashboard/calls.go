package dashboard

import (
	"errors"
	"fmt"
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
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// outcomes are the outcomes the calls page filters by.
var outcomes = []string{audit.OutcomePending, audit.OutcomeOK, audit.OutcomeError, audit.OutcomeCancelled, audit.OutcomeExpired, audit.OutcomeDeadLettered}

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
	in := r.URL.Query()
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
	Next     uint64
	Matched  int
	Error    string
	Outcomes []string
	Stats    callindex.Stats
	Live     bool
	Took     time.Duration
}

// callsPage lists calls, newest first, with the filters of the URL.
func (s *Server) callsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	start := time.Now()
	q, filters, err := queryOf(r, v)
	d := callsData{Filters: filters, Query: q, Outcomes: outcomes, Stats: s.index.Stats(), Live: q.Before == 0 && q.Text == ""}
	status := http.StatusOK
	if err != nil {
		d.Error, status = err.Error(), http.StatusBadRequest
	} else {
		d.Calls, d.Next, d.Matched = s.index.Query(q)
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
// they finish (server-sent events, each a rendered table row), until the
// client goes away, its session ends (expired, or its key no longer
// accepted: checked at each keep-alive) or the dashboard stops. Each
// stream holds one of the index's subscriptions, which are capped, and one
// key holds at most maxLiveStreamsPerKey of them.
func (s *Server) callsLive(w http.ResponseWriter, r *http.Request, v *viewer) {
	q, _, err := queryOf(r, v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.URL.Query().Get("id") // one call's page watches that call only
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
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	tick := time.NewTicker(s.keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-tick.C:
			if s.viewerOf(r) == nil {
				return // the session expired, or its key was revoked
			}
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case e, ok := <-ch:
			if !ok {
				return
			}
			if (id != "" && e.ID != id) || (id == "" && !matches(q, e)) || !v.MaySee(e.Tenant, e.Agent) {
				continue
			}
			row, err := s.renderPartial("calls", "row", e)
			if err != nil {
				s.log.Error("dashboard live row", "err", err)
				return
			}
			if _, err := fmt.Fprintf(w, "event: call\ndata: %s\n\n", strings.ReplaceAll(row, "\n", "")); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
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
	Running  bool
	Done     string // what the last action did
	Args     string
	Struct   string
}

type intentView struct {
	*toolwirev1.Intent
	Applied bool
}

// callPage shows one call's timeline.
func (s *Server) callPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("id")
	e, ok := s.index.Get(id)
	if !ok || !v.MaySee(e.Tenant, e.Agent) {
		s.render(w, r, http.StatusNotFound, "error", v, "Not found", "calls",
			errorData{Status: http.StatusNotFound, Message: fmt.Sprintf("no call %q among the newest calls this dashboard indexes", id)})
		return
	}
	rec, err := s.audit.One(r.Context(), e.Seq)
	if err != nil {
		s.render(w, r, http.StatusBadGateway, "error", v, "Unavailable", "calls", errorData{Status: http.StatusBadGateway, Message: "reading the call failed: " + err.Error()})
		return
	}
	d := callData{Entry: e, Rec: rec, Running: rec.Result == nil, Done: doneMessage(r)}
	if len(rec.Arguments) > 0 {
		d.Args = prettyJSON(rec.Arguments)
	}
	for _, raw := range rec.Events {
		ev := &toolwirev1.CallEvent{}
		if protojson.Unmarshal(raw, ev) == nil {
			d.Events = append(d.Events, ev)
		}
	}
	if len(rec.Response) > 0 {
		resp := &toolwirev1.ToolResponse{}
		if protojson.Unmarshal(rec.Response, resp) == nil { // the redacted response, never the stored one
			d.Result = resp
			if resp.StructuredJson != "" {
				d.Struct = prettyJSON([]byte(resp.StructuredJson))
			}
			d.Intents = s.intentsOf(r, v, rec, resp)
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

// intentsOf is the response's intents, each with whether the call's
// session has applied it.
func (s *Server) intentsOf(r *http.Request, v *viewer, rec *audit.Record, resp *toolwirev1.ToolResponse) []intentView {
	if len(resp.Intents) == 0 {
		return nil
	}
	applied := map[string]bool{}
	if rec.Session != "" {
		id := v.ID
		id.Tenant = rec.Tenant
		if sess, err := s.cfg.Core.GetSession(r.Context(), id, rec.Session); err == nil {
			for _, a := range sess.Applied {
				applied[a] = true
			}
			for _, a := range sess.Log {
				applied[a.CallId+"/"+a.IntentId] = true
			}
		}
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
		s.refuse(w, r, v, http.StatusBadGateway, "retry failed: "+err.Error())
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
