package dashboard

// Dead-letter purge: the dead-letter list's filters select letters; a
// dry run names them and their count; the confirmation, which must
// repeat the count and the dry run's token (bulk.go), purges exactly
// those (dlq.Queue.Purge: the letter only, never its call's record).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/dlq"
)

// bulkPurgeKind is the dead-letter purge: letters' sequences.
var bulkPurgeKind = bulkKind{action: "purge", max: maxBulk, valid: func(s string) bool {
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n > 0 && strconv.FormatUint(n, 10) == s
}}

type purgeData struct {
	Filter letterFilter
	// The dry run: the letters the confirmation will purge (Rows, the
	// newest maxBulk of Total that may be), those that match but are kept
	// (Kept, at most maxBulk of KeptTotal, with why).
	Rows      []letterRow
	Kept      []purgeKept
	Total     int
	KeptTotal int
	Capped    bool
	MaxBulk   int
	Confirm   bulkConfirmation
	// The outcome.
	Purged   []letterRow
	Failures []bulkFailure
}

type purgeKept struct {
	letterRow
	Why string
}

// callSeqOf is the calls-stream sequence of the record of the call of the
// letter row (0: the calls index does not hold that call of the letter's
// tenant and tool, so the record cannot be confirmed and the letter is
// kept), and why a letter whose record it finds is still kept ("": it
// may be purged; dlq.Purge checks both again from the streams).
func (s *Server) callSeqOf(row letterRow) (uint64, string) {
	if row.CallID == "" {
		return 0, ""
	}
	e, ok := s.index.Get(row.CallID)
	if !ok || e.Refused() || e.Tenant != row.Tenant || e.Tool != row.Tool {
		return 0, ""
	}
	if e.Outcome == audit.OutcomePending {
		return e.Seq, "its call's result is not stored yet: the letter may be the only record of why it died"
	}
	return e.Seq, ""
}

// keptWhy is why the dry run keeps the letter row ("": it may be purged).
func (s *Server) keptWhy(row letterRow) string {
	if !row.Retryable {
		return "it holds no decodable call: it is the only record of what it held"
	}
	seq, why := s.callSeqOf(row)
	if seq == 0 {
		return "its call is not among the calls this dashboard indexes, so its record in the calls stream cannot be confirmed"
	}
	return why
}

// purgeLetters is the dead-letter purge. Without confirm=1 it is the dry
// run: the page names the exact letters (at most maxBulk, the newest) the
// filter selects and may be purged, and those kept; with it, exactly the
// sequences posted are purged, once the count and the token are the dry
// run's.
func (s *Server) purgeLetters(w http.ResponseWriter, r *http.Request, v *viewer) {
	f, err := letterFilterOf(r.PostForm.Get, v, time.Now())
	if err != nil {
		s.refuse(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	d := purgeData{Filter: f, MaxBulk: maxBulk}
	if r.PostForm.Get("confirm") != "1" {
		s.purgeDryRun(w, r, v, &d)
		return
	}
	items, err := s.checkConfirmation(v, bulkPurgeKind, r.PostForm)
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
	for _, it := range items {
		seq, _ := strconv.ParseUint(it, 10, 64) // valid: checked
		row, err := s.purgeOne(ctx, v, seq)
		if err != nil {
			d.Failures = append(d.Failures, bulkFailure{Seq: seq, Reason: err.Error()})
			continue
		}
		d.Purged = append(d.Purged, row)
	}
	s.log.Info("dashboard dead-letter purge", append([]any{"who", v.who(), "purged", len(d.Purged), "failed", len(d.Failures)},
		itemsLogged(items)...)...)
	s.render(w, r, http.StatusOK, "dlq_purge_result", v, "Dead letters purged", "dlq", d)
}

// purgeDryRun shows what a purge of d.Filter would purge: the newest
// maxBulk letters that may be purged (those kept do not take their
// places), and at most maxBulk of those kept, with why.
func (s *Server) purgeDryRun(w http.ResponseWriter, r *http.Request, v *viewer, d *purgeData) {
	rows, _, err := s.selectLetters(r.Context(), v, d.Filter, maxListedLetters)
	if err != nil {
		s.refuse(w, r, v, http.StatusBadGateway, err.Error())
		return
	}
	items := []string{}
	for _, row := range rows {
		if why := s.keptWhy(row); why != "" {
			d.KeptTotal++
			if len(d.Kept) < maxBulk {
				d.Kept = append(d.Kept, purgeKept{row, why})
			}
			continue
		}
		d.Total++
		if len(d.Rows) < maxBulk {
			d.Rows = append(d.Rows, row)
			items = append(items, strconv.FormatUint(row.Seq, 10))
		}
	}
	d.Capped = d.Total > maxBulk
	d.Confirm = s.confirmationOf(v, bulkPurgeKind.action, items)
	s.render(w, r, http.StatusOK, "dlq_purge", v, "Confirm purge", "dlq", *d)
}

// purgeOne purges the letter at seq as v, naming v in its record.
func (s *Server) purgeOne(ctx context.Context, v *viewer, seq uint64) (letterRow, error) {
	l, err := s.dlq.Get(ctx, seq)
	if err == nil && !s.mayView(v, l) {
		err = fmt.Errorf("%w at sequence %d", dlq.ErrNotFound, seq) // as for a sequence that holds none
	}
	if err != nil {
		return letterRow{}, err
	}
	shown, _ := s.dlq.Shown(ctx, l)
	row := rowOf(l, shown)
	callSeq, _ := s.callSeqOf(row) // dlq.Purge checks the result itself
	if callSeq == 0 && row.Retryable {
		return row, errors.New("its call is not among the calls this dashboard indexes: the letter is kept")
	}
	req := dlq.PurgeRequest{Seq: seq, CallSeq: callSeq, By: v.who() + " (dashboard)", Keys: s.signers}
	if _, err := s.dlq.Purge(ctx, req); err != nil {
		return row, err
	}
	return row, nil
}
