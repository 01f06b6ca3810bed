package dashboard

// Limits and budgets: the limits of the policy in force, each with its
// use for one key, a meter for what is counted against a cap.
//
// Decisions where the issue was silent:
//   - The figures are the dispatcher's Usage, read as the viewer; a viewer
//     who is not an admin sees their own agent (and the session, user or
//     run they name) in their own tenant.
//   - Admins see every agent of their tenant, and with the installation
//     scope of every tenant: the tenants and agents of the calls index's
//     newest agentScan calls of the last day, at most maxAgents of them
//     (the page says when there are more), or the tenant and agent they
//     name in the form. Usage is read per tenant as an admin of it, as the
//     calls page cancels a call as its tenant.
//   - Meters: a concurrency limit's calls in flight against its cap, a
//     budget's units used in its window against its units. A rate limit's
//     state (GCRA) is not readable: its rate is shown without a meter.
//     Limits keyed by tool or a CEL expression depend on each call, so
//     nothing is read for them.

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/dispatch"
)

// Bounds of the limits page.
const (
	maxAgents  = 50
	agentScan  = 5000
	agentSince = 24 * time.Hour
)

// meter is how full something is: Percent (0-100) for a .bar, and Over
// when it is at or past its limit.
type meter struct {
	Percent int
	Over    bool
}

func meterOf(used, limit int64) meter {
	if limit <= 0 {
		return meter{}
	}
	return meter{Percent: int(min(max(used*100/limit, 0), 100)), Over: used >= limit}
}

// usageMeter is a meter with the figures it shows.
type usageMeter struct {
	meter
	Figure string
}

// usageRow is one limit's use for one key.
type usageRow struct {
	dispatch.Usage
	Rate    string // "10 per 1m0s, burst 5"; "" for none
	Meters  []usageMeter
	NotRead bool // keyed per call (tool, CEL): nothing to read
}

func rowOfUsage(u dispatch.Usage) usageRow {
	row := usageRow{Usage: u, NotRead: u.Value == ""}
	if r := u.Rate; r != nil {
		row.Rate = fmt.Sprintf("%d per %s", r.Count, r.Per)
		if r.Burst > 0 {
			row.Rate += fmt.Sprintf(", burst %d", r.Burst)
		}
	}
	if row.NotRead {
		return row
	}
	if u.Concurrency > 0 {
		row.Meters = append(row.Meters, usageMeter{meterOf(int64(u.InFlight), int64(u.Concurrency)),
			fmt.Sprintf("%d of %d in flight", u.InFlight, u.Concurrency)})
	}
	if b := u.Budget; b != nil {
		fig := fmt.Sprintf("%d of %d units used this %s window", u.Used, b.Units, b.Window)
		if !u.ResetAt.IsZero() {
			fig += ", resets " + u.ResetAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		row.Meters = append(row.Meters, usageMeter{meterOf(u.Used, b.Units), fig})
	}
	return row
}

// usageGroup is one tenant's limits: those counted for the whole tenant
// or per call, then per agent those counted per agent, session, user or
// run.
type usageGroup struct {
	Tenant string
	Shared []usageRow
	Agents []agentUsage
	Error  string
}

// Empty says no limit is in force for the tenant.
func (g usageGroup) Empty() bool {
	return len(g.Shared) == 0 && !slices.ContainsFunc(g.Agents, func(a agentUsage) bool { return len(a.Rows) > 0 || a.Error != "" })
}

type agentUsage struct {
	Agent string
	Rows  []usageRow
	Error string
}

// perAgent says whether a limit's key counts per agent (or finer).
func perAgent(key string) bool {
	return key == "agent" || key == "session" || key == "user" || key == "run"
}

type limitsData struct {
	Filter url.Values
	Groups []usageGroup
	More   int // agents found beyond maxAgents
	Error  string
}

// limitsPage shows the limits in force and their use.
func (s *Server) limitsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	get := bounded(r.URL.Query().Get)
	f := dispatch.UsageFilter{Session: get("session"), User: get("user"), Run: get("run")}
	d := limitsData{Filter: url.Values{}}
	for _, k := range []string{"tenant", "agent", "session", "user", "run"} {
		if val := get(k); val != "" && (k != "tenant" || v.Installation) && (k != "agent" || v.Admin) {
			d.Filter.Set(k, val)
		}
	}
	pairs := [][2]string{{v.ID.Tenant, v.ID.Agent}}
	if v.Admin {
		if t, a := d.Filter.Get("tenant"), d.Filter.Get("agent"); t != "" || a != "" {
			pairs = [][2]string{{cmp.Or(t, v.ID.Tenant), cmp.Or(a, v.ID.Agent)}}
		} else {
			pairs, d.More = s.recentAgents(time.Now(), v.Tenant())
			if len(pairs) == 0 {
				pairs = [][2]string{{v.ID.Tenant, v.ID.Agent}}
			}
		}
	}
	d.Groups = s.usageOf(r.Context(), v, pairs, f)
	s.render(w, r, http.StatusOK, "limits", v, "Limits and budgets", "limits", d)
}

// usageOf reads the usage of each tenant and agent of pairs, grouped by
// tenant (in the order of pairs).
func (s *Server) usageOf(ctx context.Context, v *viewer, pairs [][2]string, f dispatch.UsageFilter) []usageGroup {
	var groups []usageGroup
	index := map[string]int{}
	for _, p := range pairs {
		tenant, agent := p[0], p[1]
		as := v.ID
		as.Tenant = tenant // another only with the installation scope: others have their own tenant alone
		uf := f
		uf.Agent = agent
		us, err := s.cfg.Core.Usage(ctx, as, uf)
		gi, ok := index[tenant]
		if !ok {
			gi = len(groups)
			index[tenant] = gi
			groups = append(groups, usageGroup{Tenant: tenant})
		}
		g := &groups[gi]
		au := agentUsage{Agent: agent}
		if err != nil {
			au.Error = fmt.Sprintf("reading the usage failed: %v", err)
			g.Agents = append(g.Agents, au)
			continue
		}
		first := !ok
		for _, u := range us {
			switch {
			case perAgent(u.Key):
				au.Rows = append(au.Rows, rowOfUsage(u))
			case first:
				g.Shared = append(g.Shared, rowOfUsage(u))
			}
		}
		g.Agents = append(g.Agents, au)
	}
	return groups
}

// recentAgents returns the tenants and agents of the index's newest calls
// (of tenant; "" = every tenant) of the last agentSince (at most agentScan calls read), sorted, at most
// maxAgents, and how many more there were.
func (s *Server) recentAgents(now time.Time, tenant string) ([][2]string, int) {
	seen := map[[2]string]bool{}
	q := callindex.Query{Tenant: tenant, Since: now.Add(-agentSince), Limit: callindex.MaxQueryLimit}
	for read := 0; read < agentScan; {
		page, next, _ := s.index.Query(q)
		for _, e := range page {
			seen[[2]string{e.Tenant, e.Agent}] = true
		}
		read += len(page)
		if next == 0 || len(page) == 0 {
			break
		}
		q.Before = next
	}
	pairs := make([][2]string, 0, len(seen))
	for p := range seen {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1])) })
	if len(pairs) > maxAgents {
		return pairs[:maxAgents], len(pairs) - maxAgents
	}
	return pairs, 0
}
