package dashboard

// Dead letters: the list with its filters, one letter, retrying one, and
// the bulk retry (a dry run that names the letters, then a confirmation
// that retries exactly those).
//
// Decisions where the issue was silent:
//   - A letter belongs to the tenant of its call's caller. A letter whose
//     call could not be decoded names no tenant: admins see it, nobody
//     else does (fail closed).
//   - Letters are only ever shown through dlq.Queue.Shown (redacted), and
//     the text filter searches that redacted view, so a search can never
//     probe a secret value.
//   - The list shows the newest maxLetterRows letters that match, with the
//     exact count of those that match.
//   - A bulk retry acts on at most maxBulk letters, the newest that match;
//     the dry run says so and lists their sequences. The confirmation
//     retries the sequences it carries, never the filter again, checking
//     each is a letter the viewer may see; letters without a decodable
//     call cannot be retried and are listed apart. It runs to its end when
//     the browser goes away (bounded by bulkTimeout), and its outcome is
//     logged.
//   - Retrying one letter comes back to the letter's page, which links the
//     new call (the calls index may not have it yet).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/dlq"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// maxBulk is the most letters one bulk retry retries; maxLetterRows the
// most rows the list shows.
const (
	maxBulk       = 500
	maxLetterRows = 200
	bulkTimeout   = 2 * time.Minute
)

// letterFilter selects dead letters: the list's filters, and a bulk
// retry's dry run.
type letterFilter struct {
	Tool, Tenant, Text, Since string // as given, bounded
	since                     time.Time
}

// letterFilterOf reads a filter from get (the URL's query or a form); a
// viewer who is not an admin sees their own tenant only.
func letterFilterOf(get func(string) string, v *viewer, now time.Time) (letterFilter, error) {
	for _, k := range []string{"tool", "tenant", "q", "since"} {
		if len(strings.TrimSpace(get(k))) > maxFilterBytes {
			// Refused, never cut: a cut search matches more letters,
			// which a bulk retry would then select (review).
			return letterFilter{Tool: get("tool"), Tenant: get("tenant"), Text: get("q"), Since: get("since")},
				fmt.Errorf("%s: longer than %d bytes (searches and filters are at most %d bytes; shorten it)", k, maxFilterBytes, maxFilterBytes)
		}
	}
	field := bounded(get)
	f := letterFilter{Tool: field("tool"), Tenant: field("tenant"), Text: field("q"), Since: field("since")}
	if t := v.Tenant(); t != "" {
		f.Tenant = t
	}
	var err error
	if f.since, err = parseWhen(f.Since, now); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	return f, nil
}

// Values is the filter as a query (links and hidden fields).
func (f letterFilter) Values() url.Values {
	out := url.Values{}
	for k, s := range map[string]string{"tool": f.Tool, "tenant": f.Tenant, "q": f.Text, "since": f.Since} {
		if s != "" {
			out.Set(k, s)
		}
	}
	return out
}

// SinceTime is the since filter as a time (zero: none).
func (f letterFilter) SinceTime() time.Time { return f.since }

// Empty says the filter selects every letter the viewer may see.
func (f letterFilter) Empty() bool {
	return f.Tool == "" && f.Tenant == "" && f.Text == "" && f.Since == ""
}

// letterTenant is the tenant a letter belongs to: its call's caller's
// ("" when the call could not be decoded).
func letterTenant(l *dlq.Letter) string { return l.Record.GetCall().GetCaller().GetTenant() }

// mayView says whether v may see letter l. A viewer that sees every
// agent of the letter's tenant needs no agent; for one limited to its
// agent (identity.VisibilityOwn) the letter's call is placed with the
// agent the calls index has for it — what a dispatcher stored in CALLS —
// never the agent the letter names (a worker writes letters): a call the
// index does not hold (or holds for another tenant) is nobody's.
func (s *Server) mayView(v *viewer, l *dlq.Letter) bool {
	t := letterTenant(l)
	if t == "" {
		return v.Installation
	}
	agent := ""
	if !v.ID.SeesEveryAgent(v.Visibility) {
		if e, ok := s.index.Get(l.Record.GetCall().GetCallId()); ok && e.Tenant == t {
			agent = e.Agent
		}
	}
	return v.MaySee(t, agent)
}

// letterRow is one letter as the list shows it (redacted).
type letterRow struct {
	Seq                     uint64
	Time                    time.Time
	Tool, Tenant, Agent     string
	CallID                  string
	Reason                  string
	ErrorType, ErrorMessage string
	Attempts                int32
	Worker                  string
	// Retryable: the letter holds a call a retry can publish again.
	Retryable bool
}

func rowOf(l *dlq.Letter, shown *toolwirev1.DeadLetter) letterRow {
	c := shown.GetCall()
	row := letterRow{Seq: l.Seq, Time: l.Time(), Tool: l.Tool(), Tenant: c.GetCaller().GetTenant(), Agent: c.GetCaller().GetAgent(),
		CallID: c.GetCallId(), Reason: shown.GetReason(), Attempts: shown.GetAttempts(), Worker: shown.GetWorker(), Retryable: c != nil}
	if e := shown.GetLastError(); e != nil {
		row.ErrorType, row.ErrorMessage = strings.TrimPrefix(e.GetType().String(), "ERROR_TYPE_"), e.GetMessage()
	}
	return row
}

// matches says whether the redacted row passes f's filters.
func (f letterFilter) matches(row letterRow) bool {
	if f.Tenant != "" && row.Tenant != f.Tenant {
		return false
	}
	if !f.since.IsZero() && row.Time.Before(f.since) {
		return false
	}
	if f.Text == "" {
		return true
	}
	q := strings.ToLower(f.Text)
	for _, s := range []string{row.Reason, row.ErrorType, row.ErrorMessage, row.CallID, row.Worker} {
		if strings.Contains(strings.ToLower(s), q) {
			return true
		}
	}
	return false
}

// selectLetters returns the newest letters (at most limit) that f selects
// among those v may see, newest first, and how many match in all.
func (s *Server) selectLetters(ctx context.Context, v *viewer, f letterFilter, limit int) ([]letterRow, int, error) {
	ls, err := s.letters.list(ctx)
	if err != nil {
		return nil, 0, err
	}
	var rows []letterRow
	total := 0
	for i := len(ls) - 1; i >= 0; i-- {
		l := ls[i]
		if !s.mayView(v, l.Letter) || (f.Tool != "" && l.Tool() != f.Tool) {
			continue
		}
		if f.Tenant != "" && letterTenant(l.Letter) != f.Tenant {
			continue // before Shown: it is the costly part
		}
		shown, _ := s.letters.view(ctx, l)
		row := rowOf(l.Letter, shown)
		if !f.matches(row) {
			continue
		}
		total++
		if len(rows) < limit {
			rows = append(rows, row)
		}
	}
	return rows, total, nil
}

type dlqData struct {
	Filter  letterFilter
	Rows    []letterRow
	Total   int
	Shown   int
	MaxBulk int
	Error   string
}

// dlqPage lists the dead letters, newest first.
func (s *Server) dlqPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	f, err := letterFilterOf(r.URL.Query().Get, v, time.Now())
	d := dlqData{Filter: f, MaxBulk: maxBulk}
	status := http.StatusOK
	if err == nil {
		d.Rows, d.Total, err = s.selectLetters(r.Context(), v, f, maxLetterRows)
		if err != nil {
			status = http.StatusBadGateway
		}
	} else {
		status = http.StatusBadRequest
	}
	if err != nil {
		d.Error = err.Error()
	}
	d.Shown = len(d.Rows)
	s.render(w, r, status, "dlq", v, "Dead letters", "dlq", d)
}

// seqOf reads the {seq} path value: a dead letter's sequence.
func seqOf(r *http.Request) (uint64, bool) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	return seq, err == nil && seq > 0
}

// letterFor returns the letter at seq when v may see it; otherwise it
// answers the request (404: a letter of another tenant is not found
// either) and returns nil.
func (s *Server) letterFor(w http.ResponseWriter, r *http.Request, v *viewer, seq uint64, ok bool) *dlq.Letter {
	if !ok {
		s.refuse(w, r, v, http.StatusNotFound, "not a dead letter's sequence")
		return nil
	}
	l, err := s.dlq.Get(r.Context(), seq)
	switch {
	case errors.Is(err, dlq.ErrNotFound) || (err == nil && !s.mayView(v, l)):
		s.refuse(w, r, v, http.StatusNotFound, fmt.Sprintf("no dead letter %d", seq))
		return nil
	case err != nil:
		s.refuse(w, r, v, http.StatusBadGateway, "reading the dead letter failed: "+err.Error())
		return nil
	}
	return l
}

type letterData struct {
	Row         letterRow
	Letter      *toolwirev1.DeadLetter // redacted
	Args        string
	RawWithheld int
	Subject     string
	Stored      time.Time
	Retried     string // the call a retry just made
}

// callIDRe is what a call id looks like (a ULID), for ids read from a URL.
var callIDRe = regexp.MustCompile(`^[0-9A-Za-z]{1,64}$`)

// letterPage shows one dead letter, redacted.
func (s *Server) letterPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	seq, ok := seqOf(r)
	l := s.letterFor(w, r, v, seq, ok)
	if l == nil {
		return
	}
	shown, withheld := s.dlq.Shown(r.Context(), l)
	d := letterData{Row: rowOf(l, shown), Letter: shown, RawWithheld: withheld, Subject: l.Subject, Stored: l.Stored}
	if args := shown.GetCall().GetArguments(); len(args) > 0 {
		d.Args = prettyJSON(args)
	}
	if id := r.URL.Query().Get("retried"); callIDRe.MatchString(id) {
		d.Retried = id
	}
	s.render(w, r, http.StatusOK, "letter", v, fmt.Sprintf("Dead letter %d", seq), "dlq", d)
}

// refuseRetry answers a retry that queued nothing: a letter without a
// call, or a call the dispatcher's check refuses now (its session ended,
// its mode or the policy forbids it), is a conflict the operator is told
// of as an approval's refusal is; anything else a failure upstream.
func (s *Server) refuseRetry(w http.ResponseWriter, r *http.Request, v *viewer, err error) {
	switch {
	case errors.Is(err, dlq.ErrSessionInactive), errors.Is(err, dlq.ErrModeRestricted), errors.Is(err, dlq.ErrPolicyDenies):
		s.refuse(w, r, v, http.StatusConflict, "retry refused, nothing was queued: "+err.Error())
	case errors.Is(err, dlq.ErrNotRetryable):
		s.refuse(w, r, v, http.StatusConflict, "retry failed: "+err.Error())
	default:
		s.refuse(w, r, v, http.StatusBadGateway, "retry failed: "+err.Error())
	}
}

// retryLetter retries one dead letter as a new call, naming who asked in
// its admission record.
func (s *Server) retryLetter(w http.ResponseWriter, r *http.Request, v *viewer) {
	seq, ok := seqOf(r)
	if l := s.letterFor(w, r, v, seq, ok); l == nil {
		return
	}
	call, err := s.dlq.RetryBy(r.Context(), seq, v.who()+" (dashboard)")
	if call == nil {
		s.refuseRetry(w, r, v, err)
		return
	}
	if err != nil {
		s.log.Warn("dashboard retry: the call was queued without its admission record", "who", v.who(), "dead_letter", seq, "new_call", call.CallId, "err", err)
	}
	s.log.Info("dashboard retry", "who", v.who(), "dead_letter", seq, "new_call", call.CallId)
	http.Redirect(w, r, fmt.Sprintf("%s/dlq/%d?retried=%s", Prefix, seq, url.QueryEscape(call.CallId)), http.StatusSeeOther)
}

type bulkData struct {
	Filter letterFilter
	// The dry run: the letters the confirmation will retry (Rows), those
	// that match but cannot be retried, and how many match in all.
	Rows, Unretryable []letterRow
	Total             int
	Capped            bool
	MaxBulk           int
	// The outcome.
	Created  []bulkCreated
	Failures []bulkFailure
}

type bulkCreated struct {
	Seq              uint64
	OldCall, NewCall string
	Warning          string
}

type bulkFailure struct {
	Seq    uint64
	Reason string
}

// retryLetters is the bulk retry. Without confirm=1 it is the dry run: the
// page names the exact letters (at most maxBulk) the filter selects, and
// carries their sequences in a form with confirm=1. With it, exactly the
// sequences posted are retried.
func (s *Server) retryLetters(w http.ResponseWriter, r *http.Request, v *viewer) {
	f, err := letterFilterOf(r.PostForm.Get, v, time.Now())
	if err != nil {
		s.refuse(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	if r.PostForm.Get("confirm") != "1" {
		s.bulkDryRun(w, r, v, f)
		return
	}
	seqs, err := postedSeqs(r.PostForm["seq"])
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
	d := bulkData{Filter: f, MaxBulk: maxBulk}
	for _, seq := range seqs {
		l, err := s.dlq.Get(ctx, seq)
		if err == nil && !s.mayView(v, l) {
			err = fmt.Errorf("%w at sequence %d", dlq.ErrNotFound, seq) // as for a sequence that holds none
		}
		if err != nil {
			d.Failures = append(d.Failures, bulkFailure{Seq: seq, Reason: err.Error()})
			continue
		}
		call, err := s.dlq.RetryBy(ctx, seq, v.who()+" (dashboard, bulk)")
		if call == nil {
			d.Failures = append(d.Failures, bulkFailure{Seq: seq, Reason: err.Error()})
			continue
		}
		c := bulkCreated{Seq: seq, OldCall: l.Record.GetCall().GetCallId(), NewCall: call.CallId}
		if err != nil {
			c.Warning = err.Error()
		}
		d.Created = append(d.Created, c)
	}
	s.log.Info("dashboard bulk retry", "who", v.who(), "asked", len(seqs), "retried", len(d.Created), "failed", len(d.Failures),
		"filter", f.Values().Encode())
	s.render(w, r, http.StatusOK, "dlq_result", v, "Bulk retry", "dlq", d)
}

// bulkDryRun shows what a bulk retry of f would retry.
func (s *Server) bulkDryRun(w http.ResponseWriter, r *http.Request, v *viewer, f letterFilter) {
	rows, total, err := s.selectLetters(r.Context(), v, f, maxBulk)
	if err != nil {
		s.refuse(w, r, v, http.StatusBadGateway, err.Error())
		return
	}
	d := bulkData{Filter: f, Total: total, Capped: total > maxBulk, MaxBulk: maxBulk}
	for _, row := range rows {
		if row.Retryable {
			d.Rows = append(d.Rows, row)
		} else {
			d.Unretryable = append(d.Unretryable, row)
		}
	}
	s.render(w, r, http.StatusOK, "dlq_confirm", v, "Confirm bulk retry", "dlq", d)
}

// postedSeqs reads a confirmation's sequences: at most maxBulk, each a
// sequence, each once (in the order given).
func postedSeqs(in []string) ([]uint64, error) {
	if len(in) == 0 {
		return nil, errors.New("no dead letters to retry: start again from the list")
	}
	if len(in) > maxBulk {
		return nil, fmt.Errorf("%d dead letters: a bulk retry retries at most %d", len(in), maxBulk)
	}
	seen := make(map[uint64]bool, len(in))
	out := make([]uint64, 0, len(in))
	for _, s := range in {
		seq, err := strconv.ParseUint(s, 10, 64)
		if err != nil || seq == 0 {
			return nil, fmt.Errorf("%.32q is not a dead letter's sequence", s)
		}
		if !seen[seq] {
			seen[seq] = true
			out = append(out, seq)
		}
	}
	return out, nil
}
