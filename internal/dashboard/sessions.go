package dashboard

import (
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/intents"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// sessionCalls is how many of a session's newest calls its page lists
// (the calls page, filtered by the session, has them all).
const sessionCalls = 20

// sessionsPageSize is how many sessions one sessions page lists.
const sessionsPageSize = 100

type sessionRow struct {
	*toolwirev1.Session
	Href string
}

type sessionsData struct {
	Tenant   string
	Filters  url.Values
	Sessions []sessionRow
	// Next is the query of the next page; "" on the last.
	Next  string
	Error string
}

// sessionsTenant is the tenant whose sessions the viewer's page shows: its
// own, or, for a viewer with the installation scope, the tenant the URL
// names (its own when none).
func sessionsTenant(r *http.Request, v *viewer) string {
	if t := bounded(r.URL.Query().Get)("tenant"); t != "" && v.Installation {
		return t
	}
	return v.ID.Tenant
}

// sessionHref is the link to a session's page.
func sessionHref(tenant, session string, v *viewer) string {
	q := url.Values{"id": {session}}
	if v.Installation {
		q.Set("tenant", tenant)
	}
	return Prefix + "/session?" + q.Encode()
}

// sessionsPage lists one page of a tenant's sessions (the dispatcher's
// ListSessions, as the viewer: least recently updated first), filtered by
// state and mode.
func (s *Server) sessionsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	get := bounded(r.URL.Query().Get)
	tenant := sessionsTenant(r, v)
	d := sessionsData{Tenant: tenant, Filters: url.Values{}}
	for _, k := range []string{"tenant", "state", "mode"} {
		if x := get(k); x != "" && (k != "tenant" || v.Installation) {
			d.Filters.Set(k, x)
		}
	}
	q := intents.ListQuery{Mode: get("mode"), PageSize: sessionsPageSize, PageToken: get("page")}
	status := http.StatusOK
	switch get("state") {
	case "":
	case "active":
		q.State = toolwirev1.SessionStateFilter_SESSION_STATE_FILTER_ACTIVE
	case "ended":
		q.State = toolwirev1.SessionStateFilter_SESSION_STATE_FILTER_ENDED
	default:
		d.Error, status = "state: active or ended", http.StatusBadRequest
	}
	if d.Error == "" {
		id := v.ID
		id.Tenant = tenant
		page, err := s.cfg.Core.ListSessions(r.Context(), id, q)
		switch {
		case errors.Is(err, dispatch.ErrSessionsHidden):
			d.Error, status = "listing sessions needs the admin or approve scope: this installation shows a key its own agent's calls only", http.StatusForbidden
		case errors.Is(err, intents.ErrBadPageToken):
			d.Error, status = err.Error(), http.StatusBadRequest
		case err != nil:
			d.Error, status = "listing sessions failed: "+err.Error(), http.StatusBadGateway
		}
		for _, sess := range page.Sessions {
			d.Sessions = append(d.Sessions, sessionRow{Session: sess, Href: sessionHref(tenant, sess.GetSession(), v)})
		}
		if page.Next != "" {
			next := maps.Clone(d.Filters)
			next.Set("page", page.Next)
			d.Next = next.Encode()
		}
	}
	s.render(w, r, status, "sessions", v, "Sessions", "sessions", d)
}

type stateValue struct{ Key, JSON string }

type sessionData struct {
	Tenant string
	S      *toolwirev1.Session
	State  []stateValue
	// Pins are the spec versions the session pins, by tool name.
	Pins []stateValue
	// Calls are the session's newest calls the viewer may see; CallsHref
	// the calls page filtered by the session.
	Calls     []callindex.Entry
	CallsHref string
}

// sessionPage shows one session of a tenant: its state, mode, end, state
// values and log (GetSession as the viewer: under agent visibility "own"
// the log keeps the entries of calls the viewer may see), and its newest
// calls from the calls index. A session nothing was applied to shows
// revision 0.
func (s *Server) sessionPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	session := bounded(r.URL.Query().Get)("id")
	tenant := sessionsTenant(r, v)
	if session == "" {
		s.render(w, r, http.StatusBadRequest, "error", v, "Bad request", "sessions", errorData{Status: http.StatusBadRequest, Message: "no session named (?id=)"})
		return
	}
	id := v.ID
	id.Tenant = tenant
	sess, err := s.cfg.Core.GetSession(r.Context(), id, session)
	if err != nil {
		s.render(w, r, http.StatusBadGateway, "error", v, "Unavailable", "sessions", errorData{Status: http.StatusBadGateway, Message: "reading the session failed: " + err.Error()})
		return
	}
	d := sessionData{Tenant: tenant, S: sess}
	for _, k := range slices.Sorted(maps.Keys(sess.GetStateJson())) {
		d.State = append(d.State, stateValue{Key: k, JSON: sess.GetStateJson()[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(sess.GetPinnedVersions())) {
		d.Pins = append(d.Pins, stateValue{Key: k, JSON: sess.GetPinnedVersions()[k]})
	}
	calls := url.Values{"session": {session}}
	if v.Installation {
		calls.Set("tenant", tenant)
	}
	d.CallsHref = Prefix + "/calls?" + calls.Encode()
	d.Calls, _, _ = s.index.List(callindex.Query{Tenant: tenant, Agent: v.Agent(), Session: session, Limit: sessionCalls}, callindex.Cursor{})
	s.render(w, r, http.StatusOK, "session", v, "Session "+session, "sessions", d)
}
