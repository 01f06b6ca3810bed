package dashboard

// Bulk cancel: the calls page's filters (and a pool) select pending
// calls; a dry run names them and their count; the confirmation, which
// must repeat the count and the dry run's token (bulk.go), cancels
// exactly those through the dispatcher's cancel, one by one, as the
// single cancel does.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/callindex"
)

// maxCancelScan bounds the calls a bulk cancel's dry run looks at (the
// index's pages of pending calls, newest first) when it filters by pool,
// which the index does not know.
const maxCancelScan = callindex.MatchedCap

type cancelData struct {
	Filters url.Values // the calls page's filters and the pool, as given
	Pool    string
	// The dry run: the calls the confirmation will cancel, how many match
	// in all (at most maxCancelScan looked at), and the confirmation.
	Rows    []callindex.Entry
	Total   int
	Capped  bool
	MaxBulk int
	Confirm bulkConfirmation
	// The outcome: each call asked, with what the dispatcher answered.
	Done     []cancelDone
	Failures []cancelDone
}

type cancelDone struct {
	ID, Tool, Tenant string
	Outcome          string // the cancel's outcome (cancelled, already_finished, …) or why it failed
}

// cancelFilterOf reads a bulk cancel's filter from the form: the calls
// page's (queryFrom: the viewer's tenant and agent forced), the outcome
// pending (only pending calls are cancelled; another outcome is refused),
// and pool, bounded.
func cancelFilterOf(form url.Values, v *viewer) (callindex.Query, url.Values, string, error) {
	q, filters, err := queryFrom(form, v)
	if err != nil {
		return q, filters, "", err
	}
	if q.Outcome != "" && q.Outcome != audit.OutcomePending {
		return q, filters, "", fmt.Errorf("outcome: a bulk cancel cancels %s calls only", audit.OutcomePending)
	}
	pool := strings.TrimSpace(form.Get("pool"))
	if len(pool) > maxFilterBytes {
		return q, filters, "", fmt.Errorf("pool: longer than %d bytes (searches and filters are at most %d bytes; shorten it)", maxFilterBytes, maxFilterBytes)
	}
	if pool != "" {
		filters.Set("pool", pool)
	}
	q.Outcome, q.Before, q.Limit = audit.OutcomePending, 0, callindex.MaxQueryLimit
	return q, filters, pool, nil
}

// poolOf is the pool the dispatcher routes calls of tool for tenant to
// ("" for a tool the registry no longer has).
func (s *Server) poolOf(tenant, tool string) string {
	e, err := s.cfg.Registry.Get(tool)
	if err != nil || e == nil {
		return ""
	}
	return s.cfg.Core.PoolOf(tenant, e.Spec)
}

// selectPending returns the newest pending calls (at most maxBulk) that q
// and pool select, newest first, and how many match among the newest
// maxCancelScan that q selects.
func (s *Server) selectPending(q callindex.Query, pool string) (rows []callindex.Entry, total int) {
	scanned := 0
	for scanned < maxCancelScan {
		page, next, _ := s.index.Query(q)
		for _, e := range page {
			if pool != "" && s.poolOf(e.Tenant, e.Tool) != pool {
				continue
			}
			total++
			if len(rows) < maxBulk {
				rows = append(rows, e)
			}
		}
		scanned += len(page)
		if next == 0 || len(page) == 0 {
			break
		}
		q.Before = next
	}
	return rows, total
}

// cancelCalls is the bulk cancel. Without confirm=1 it is the dry run:
// the page names the exact pending calls (at most maxBulk) the filter
// selects, with a confirmation form carrying their ids, their count and
// its token. With it, exactly the ids posted are cancelled, once the
// count and the token are the dry run's.
func (s *Server) cancelCalls(w http.ResponseWriter, r *http.Request, v *viewer) {
	q, filters, pool, err := cancelFilterOf(r.PostForm, v)
	if err != nil {
		s.refuse(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	d := cancelData{Filters: filters, Pool: pool, MaxBulk: maxBulk}
	if r.PostForm.Get("confirm") != "1" {
		d.Rows, d.Total = s.selectPending(q, pool)
		d.Capped = d.Total > len(d.Rows)
		ids := make([]string, len(d.Rows))
		for i, e := range d.Rows {
			ids[i] = e.ID
		}
		d.Confirm = s.confirmationOf(v, bulkCancelKind.action, ids)
		s.render(w, r, http.StatusOK, "calls_cancel", v, "Confirm bulk cancel", "calls", d)
		return
	}
	ids, err := s.checkConfirmation(v, bulkCancelKind, r.PostForm)
	if err != nil {
		s.refuse(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	if !s.startBulk(w, r, v) {
		return
	}
	defer s.bulk.end(v.CSRF)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkTimeout)
	defer cancel()
	reason := "cancelled from the dashboard by " + v.who() + " (bulk)"
	for _, id := range ids {
		e, ok := s.index.Get(id)
		if !ok || !v.MaySee(e.Tenant, e.Agent) {
			d.Failures = append(d.Failures, cancelDone{ID: id, Outcome: "no such call"}) // as for an id nobody minted
			continue
		}
		as := v.ID
		as.Tenant = e.Tenant
		done := cancelDone{ID: id, Tool: e.Tool, Tenant: e.Tenant}
		out, err := s.cfg.Core.Cancel(ctx, as, id, reason)
		if err != nil {
			done.Outcome = "cancel failed: " + err.Error()
			d.Failures = append(d.Failures, done)
			continue
		}
		done.Outcome = strings.ToLower(strings.TrimPrefix(out.String(), "CANCEL_OUTCOME_"))
		d.Done = append(d.Done, done)
	}
	s.log.Info("dashboard bulk cancel", append([]any{"who", v.who(), "answered", len(d.Done), "failed", len(d.Failures)},
		itemsLogged(ids)...)...)
	s.render(w, r, http.StatusOK, "calls_cancel_result", v, "Bulk cancel", "calls", d)
}
