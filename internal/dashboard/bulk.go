package dashboard

// The exact confirmation of a bulk action (bulk cancel, dead-letter
// purge): the dry run names the set it would act on and how many, and
// carries them to the confirmation with a token that binds the two to
// each other, to the action and to the session; the confirmation acts on
// exactly that set, and only when the count and the token it repeats are
// the dry run's.

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// bulkRuns are the sessions (by their CSRF token) running a bulk action:
// a session runs one at a time (each runs on after its request, up to
// bulkTimeout and maxBulk items), so the number running is bounded by
// the sessions signed in, one each.
type bulkRuns struct {
	mu      sync.Mutex
	running map[string]bool
}

// start takes session's slot; false when its previous bulk action is
// still running.
func (b *bulkRuns) start(session string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running[session] {
		return false
	}
	if b.running == nil {
		b.running = map[string]bool{}
	}
	b.running[session] = true
	return true
}

// end frees session's slot.
func (b *bulkRuns) end(session string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.running, session)
}

// startBulk takes v's session's bulk slot, or answers 429 and returns
// false; the caller defers s.bulk.end(v.CSRF) when it returns true.
func (s *Server) startBulk(w http.ResponseWriter, r *http.Request, v *viewer) bool {
	if s.bulk.start(v.CSRF) {
		return true
	}
	s.refuse(w, r, v, http.StatusTooManyRequests, "a bulk action of yours is still running: wait for its result before starting another")
	return false
}

// confirmToken is the token a dry run of action over items (in the order
// listed) gives its confirmation: an HMAC, under the CSRF key, of the
// session's CSRF token, the action, the count and the items. A
// confirmation whose items, count or action differ from its dry run's, or
// that another session made, does not carry it.
func (k *keys) confirmToken(v *viewer, action string, items []string) string {
	m := hmac.New(sha256.New, k.csrf)
	m.Write([]byte("confirm\x00" + action + "\x00" + v.CSRF + "\x00" + strconv.Itoa(len(items))))
	for _, it := range items {
		m.Write([]byte{0})
		m.Write([]byte(it))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// bulkConfirmation is what a dry run hands its confirmation (hidden
// fields of the confirm form).
type bulkConfirmation struct {
	Action string
	Items  []string
	Count  int
	Token  string
}

// confirmationOf is the confirmation of a dry run of action over items.
func (s *Server) confirmationOf(v *viewer, action string, items []string) bulkConfirmation {
	return bulkConfirmation{Action: action, Items: items, Count: len(items), Token: s.keys.confirmToken(v, action, items)}
}

// errNotConfirmed: a confirmation that does not repeat its dry run.
var errNotConfirmed = errors.New("this confirmation does not match the dry run it came from (the count or the list differs, or another session made it): start again from the list")

// bulkKind is a bulk action: its name (in its tokens), the most items
// one confirmation takes, and what an item looks like.
type bulkKind struct {
	action string
	max    int
	valid  func(string) bool
}

// bulkCancelKind is the bulk cancel: call ids.
var bulkCancelKind = bulkKind{action: "cancel", max: maxBulk, valid: callIDRe.MatchString}

// checkConfirmation checks a bulk confirmation of kind k: at most k.max
// items, each valid and given once, the count posted equal to their
// number and the token the dry run's for exactly them. It returns the
// items.
func (s *Server) checkConfirmation(v *viewer, k bulkKind, form map[string][]string) ([]string, error) {
	items := form["item"]
	if len(items) == 0 {
		return nil, errors.New("nothing to confirm: start again from the list")
	}
	if len(items) > k.max {
		return nil, fmt.Errorf("%d items: a bulk %s takes at most %d", len(items), k.action, k.max)
	}
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		if !k.valid(it) {
			return nil, fmt.Errorf("%.32q is not what this action takes", it)
		}
		if seen[it] {
			return nil, fmt.Errorf("%.32q is listed twice", it)
		}
		seen[it] = true
	}
	count := strings.TrimSpace(first(form["count"]))
	if count != strconv.Itoa(len(items)) {
		return nil, fmt.Errorf("the confirmation says %.16q but lists %d: %w", count, len(items), errNotConfirmed)
	}
	want := s.keys.confirmToken(v, k.action, items)
	if subtle.ConstantTimeCompare([]byte(first(form["token"])), []byte(want)) != 1 {
		return nil, errNotConfirmed
	}
	return items, nil
}

// itemsLogged are the log attributes naming the items a confirmed bulk
// action acted on: their count, the first and last, and the SHA-256 of
// the list (one item a line), which the dry run's list reproduces. Not
// the filter posted with the confirmation: the token binds the items,
// not the filter, so a re-posted filter need not be what chose them.
func itemsLogged(items []string) []any {
	sum := sha256.Sum256([]byte(strings.Join(items, "\n")))
	return []any{"items", len(items), "first_item", items[0], "last_item", items[len(items)-1], "items_sha256", hex.EncodeToString(sum[:])}
}

// first is vs's first value ("" for none).
func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}
