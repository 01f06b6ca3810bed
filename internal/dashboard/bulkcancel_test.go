package dashboard

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/logtest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

var (
	hiddenItemRe  = regexp.MustCompile(`<input type="hidden" name="item" value="([^"]+)">`)
	hiddenCountRe = regexp.MustCompile(`<input type="hidden" name="count" value="(\d+)">`)
	hiddenTokenRe = regexp.MustCompile(`<input type="hidden" name="token" value="([0-9a-f]+)">`)
)

// confirmForm is a dry run's confirmation as its page carries it: the
// items, the count and the token.
type confirmForm struct {
	items        []string
	count, token string
}

func confirmOf(t *testing.T, body string) confirmForm {
	t.Helper()
	var c confirmForm
	for _, m := range hiddenItemRe.FindAllStringSubmatch(body, -1) {
		c.items = append(c.items, m[1])
	}
	m := hiddenCountRe.FindStringSubmatch(body)
	require.NotNil(t, m, "the dry run carries its count")
	c.count = m[1]
	m = hiddenTokenRe.FindStringSubmatch(body)
	require.NotNil(t, m, "the dry run carries its token")
	c.token = m[1]
	return c
}

// form is the confirmation posted with the filter extra.
func (c confirmForm) form(extra url.Values) url.Values {
	f := url.Values{"confirm": {"1"}, "item": c.items, "count": {c.count}, "token": {c.token}}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

// hold submits a call of hold (it runs until cancelled) as id and waits
// for the index to have it.
func hold(t *testing.T, u *uiStack, id identity.Identity) string {
	t.Helper()
	sub, err := u.Dispatcher.Submit(t.Context(), id, &toolwirev1.CallRequest{Tool: "hold"})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	waitFor(t, "the index has "+sub.CallID, func() bool { _, ok := u.UI.index.Get(sub.CallID); return ok })
	return sub.CallID
}

// cancelled says whether the call has a cancel tombstone.
func cancelled(t *testing.T, u *uiStack, tenant, id string) bool {
	t.Helper()
	_, err := u.Env.Bus.Cancels.Get(t.Context(), bus.CancelKey(tenant, id))
	require.True(t, err == nil || errors.Is(err, jetstream.ErrKeyNotFound), "%v", err)
	return err == nil
}

// A bulk cancel's dry run names the exact pending calls of the viewer's
// tenant the filter selects and their count; a confirmation that does not
// repeat the count and the dry run's token (another count, a call taken
// out or added, another session's) cancels nothing; the confirmation
// cancels exactly the listed calls (not one that matched since) through
// the dispatcher's cancel, whose record names who asked.
func TestBulkCancelConfirmsExactlyTheListedCalls(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	u := startUIWith(t, testTools(nil), dispatch.Config{}, func(c *Config) { c.Logger = logs.JSONLogger() }, nil)
	var mine []string
	for range 3 {
		mine = append(mine, hold(t, u, acmeBot))
	}
	theirs := hold(t, u, globexBot)
	call(t, u, acmeBot, "echo", `{"text":"finished"}`)
	admin := u.signIn(t, adminKey)

	_, page := admin.get("/ui/calls")
	require.Contains(t, page, `data-testid="bulk-cancel"`, "an admin is offered a bulk cancel")
	_, page = u.signIn(t, readerKey).get("/ui/calls")
	require.NotContains(t, page, `data-testid="bulk-cancel"`, "a read-only key is not")

	res, body := admin.act("/ui/calls/cancel", url.Values{"tool": {"hold"}, "tenant": {"globex"}})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="count">3<`, "the exact count, of the viewer's tenant whatever the form says")
	dry := confirmOf(t, body)
	require.Equal(t, "3", dry.count)
	require.ElementsMatch(t, mine, dry.items, "exactly the pending calls of the filter: %s", body)
	require.NotContains(t, body, theirs)

	late := hold(t, u, acmeBot) // matches the filter, after the dry run
	other := u.signIn(t, adminKey)
	for name, f := range map[string]url.Values{
		"no count":          {"confirm": {"1"}, "item": dry.items, "token": {dry.token}},
		"another count":     dry.form(url.Values{"count": {"2"}}),
		"no token":          {"confirm": {"1"}, "item": dry.items, "count": {dry.count}},
		"a call taken out":  dry.form(url.Values{"item": dry.items[:2], "count": {"2"}}),
		"a call added":      dry.form(url.Values{"item": append(slices.Clone(dry.items), late), "count": {"4"}}),
		"a call twice":      dry.form(url.Values{"item": append(slices.Clone(dry.items), dry.items[0]), "count": {"4"}}),
		"not a call id":     dry.form(url.Values{"item": {"../x"}, "count": {"1"}}),
		"nothing confirmed": {"confirm": {"1"}},
	} {
		res, body := admin.act("/ui/calls/cancel", f)
		require.Equal(t, http.StatusBadRequest, res.StatusCode, "%s: %s", name, body)
	}
	res, body = other.act("/ui/calls/cancel", dry.form(nil))
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "another session's confirmation: %s", body)
	require.Contains(t, body, "does not match the dry run")
	for _, id := range append(slices.Clone(mine), late) {
		require.False(t, cancelled(t, u, "acme", id), "a refused confirmation cancels nothing")
	}

	res, body = admin.act("/ui/calls/cancel", dry.form(url.Values{"tool": {"hold"}}))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="answered-count">3<`, body)
	require.NotContains(t, body, `data-testid="failed-count"`)
	require.Equal(t, 3, strings.Count(body, `data-testid="cancel-outcome">requested<`))
	for _, id := range mine {
		require.True(t, cancelled(t, u, "acme", id), "a listed call is cancelled")
		r, err := u.Dispatcher.GetResult(t.Context(), acmeBot, id, 20*time.Second)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, r.Response.GetError().GetType())
	}
	// The log line names the items the confirmation bound (their list's
	// SHA-256), not the filter posted with it ("tool": "hold" above).
	sum := sha256.Sum256([]byte(strings.Join(dry.items, "\n"))) // in the order posted
	require.Contains(t, logs.String(), `"items_sha256":"`+hex.EncodeToString(sum[:])+`"`, logs.String())
	require.NotContains(t, logs.String(), `"filter"`)
	require.False(t, cancelled(t, u, "acme", late), "a call not listed is never cancelled")
	require.False(t, cancelled(t, u, "globex", theirs), "another tenant's call is never cancelled")
	waitFor(t, "the call's record names who cancelled it", func() bool {
		_, page := admin.get("/ui/calls/" + mine[0])
		return strings.Contains(page, "cancelled from the dashboard by acme/ops (bulk)") && strings.Contains(page, ">cancelled<")
	})
}

// A confirmation that names another tenant's call (with a valid token:
// an installation key's dry run replayed by a tenant's admin cannot be
// made, so the test mints one) answers it as an unknown call and does not
// cancel it; an installation key's dry run lists every tenant's.
func TestBulkCancelIsTenantScoped(t *testing.T) {
	t.Parallel()
	u := startUI(t, testTools(nil), dispatch.Config{})
	mine, theirs := hold(t, u, acmeBot), hold(t, u, globexBot)

	root := u.signIn(t, installKey)
	_, body := root.act("/ui/calls/cancel", url.Values{"tool": {"hold"}})
	require.ElementsMatch(t, []string{mine, theirs}, confirmOf(t, body).items, "the installation sees every tenant")

	admin := u.signIn(t, adminKey)
	_, body = admin.act("/ui/calls/cancel", url.Values{"tool": {"hold"}})
	dry := confirmOf(t, body)
	require.Equal(t, []string{mine}, dry.items)
	v := &viewer{CSRF: admin.csrf()}
	forged := confirmForm{items: []string{theirs, mine}, count: "2", token: u.UI.keys.confirmToken(v, bulkCancelKind.action, []string{theirs, mine})}
	res, body := admin.act("/ui/calls/cancel", forged.form(nil))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="answered-count">1<`)
	require.Contains(t, body, `data-testid="failed-count">1<`)
	require.Contains(t, body, fmt.Sprintf(`<tr data-call-id="%s"><td>%s</td><td class="error">no such call</td>`, theirs, theirs))
	require.False(t, cancelled(t, u, "globex", theirs), "another tenant's call is never cancelled")
	require.True(t, cancelled(t, u, "acme", mine))
}

// A bulk cancel's dry run takes at most maxBulk calls, the newest, and
// says how many more match; a confirmation of more is refused; a filter
// on another outcome than pending is refused; the pool filter selects
// the calls of that pool.
func TestBulkCancelIsBoundedAndFiltersByPool(t *testing.T) {
	t.Parallel()
	u := startUI(t, testTools(nil), dispatch.Config{})
	id := hold(t, u, acmeBot)
	admin := u.signIn(t, adminKey)

	res, body := admin.act("/ui/calls/cancel", url.Values{"outcome": {"ok"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, "cancels pending calls only")
	res, _ = admin.act("/ui/calls/cancel", url.Values{"pool": {strings.Repeat("p", maxFilterBytes+1)}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "a pool filter is bounded")

	pool := u.UI.poolOf("acme", "hold")
	require.NotEmpty(t, pool)
	_, body = admin.act("/ui/calls/cancel", url.Values{"pool": {pool}})
	require.Equal(t, []string{id}, confirmOf(t, body).items, "the pool's pending calls")
	_, body = admin.act("/ui/calls/cancel", url.Values{"pool": {"no-such-pool"}})
	require.Contains(t, body, `data-testid="count">0<`)
	require.Contains(t, body, "Nothing to cancel")

	many := make([]string, maxBulk+1)
	for i := range many {
		many[i] = fmt.Sprintf("%026d", i)
	}
	res, body = admin.act("/ui/calls/cancel", url.Values{"confirm": {"1"}, "item": many, "count": {fmt.Sprint(len(many))}, "token": {"00"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, fmt.Sprintf("takes at most %d", maxBulk))
}

// A bulk cancel's dry run names at most maxBulk calls, the newest, and
// says how many match in all.
func TestBulkCancelDryRunIsCapped(t *testing.T) {
	t.Parallel()
	u := startUI(t, testTools(nil), dispatch.Config{})
	now := time.Now().UTC()
	var newest string
	for i := range maxBulk + 2 {
		id := ulid.MustNew(ulid.Timestamp(now), ulid.DefaultEntropy()).String()
		require.True(t, u.UI.index.Add(callindex.Entry{ID: id, Seq: uint64(1_000_000 + i), Time: now, Tenant: "acme", Agent: "bot", Tool: "ghost",
			Outcome: audit.OutcomePending}, []byte(`{}`), nil))
		newest = id
	}
	_, body := u.signIn(t, adminKey).act("/ui/calls/cancel", url.Values{"tool": {"ghost"}})
	require.Contains(t, body, fmt.Sprintf(`data-testid="count">%d<`, maxBulk))
	require.Contains(t, body, fmt.Sprintf("%d match: a bulk cancel acts on at most %d", maxBulk+2, maxBulk))
	dry := confirmOf(t, body)
	require.Len(t, dry.items, maxBulk)
	require.Equal(t, newest, dry.items[0], "the newest first")
	require.Equal(t, strconv.Itoa(maxBulk), dry.count)
}

// A session runs one bulk action at a time: while one of its bulk
// actions runs, its next confirmation (cancel, purge or retry) is
// answered 429 and acts on nothing; another session's is not held up,
// and once the first ends the session may start the next.
func TestBulkActionsRunOneAtATimePerSession(t *testing.T) {
	t.Parallel()
	u := startUI(t, testTools(nil), dispatch.Config{})
	id := hold(t, u, acmeBot)
	admin := u.signIn(t, adminKey)
	_, body := admin.act("/ui/calls/cancel", url.Values{"tool": {"hold"}})
	dry := confirmOf(t, body)
	require.Equal(t, []string{id}, dry.items)

	require.True(t, u.UI.bulk.start(admin.csrf()), "a bulk action of this session is running")
	for path, f := range map[string]url.Values{
		"/ui/calls/cancel": dry.form(url.Values{"tool": {"hold"}}),
		"/ui/dlq/purge":    {"confirm": {"1"}, "item": {"1"}, "count": {"1"}, "token": {u.UI.keys.confirmToken(&viewer{CSRF: admin.csrf()}, bulkPurgeKind.action, []string{"1"})}},
		"/ui/dlq/retry":    {"confirm": {"1"}, "seq": {"1"}},
	} {
		res, body := admin.act(path, f)
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "%s: %s", path, body)
		require.Contains(t, body, "a bulk action of yours is still running")
	}
	require.False(t, cancelled(t, u, "acme", id), "a refused confirmation cancels nothing")

	other := u.signIn(t, adminKey)
	res, _ := other.act("/ui/calls/cancel", url.Values{"tool": {"hold"}})
	require.Equal(t, http.StatusOK, res.StatusCode, "another session's dry run")

	u.UI.bulk.end(admin.csrf())
	res, body = admin.act("/ui/calls/cancel", dry.form(url.Values{"tool": {"hold"}}))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.True(t, cancelled(t, u, "acme", id))
	require.True(t, u.UI.bulk.start(admin.csrf()), "the slot is free once the action ends")
	u.UI.bulk.end(admin.csrf())
}
