package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dlq"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The secrets the pages' tools are called with: no page may show them.
const (
	flakySecret = "tok-5f3a9c-never-shown"
	wipeSecret  = "key-hunter2-never-shown"
)

// pageTools are testTools plus flaky (always fails, one attempt: every
// call is dead-lettered) and wipe (every call needs an approval), each
// with a secret argument.
func pageTools() []*tool.Tool {
	type flakyArgs struct {
		N     int    `json:"n"`
		Token string `json:"token" toolwire:"secret"`
	}
	type wipeArgs struct {
		Path string `json:"path"`
		Key  string `json:"key,omitempty" toolwire:"secret"`
	}
	return append(testTools(nil),
		tool.Must(tool.New("flaky", func(_ context.Context, in flakyArgs) (string, error) {
			return "", tool.Transient(errors.New("upstream down"))
		}, tool.WithRetryPolicy(&toolwirev1.RetryPolicy{MaxAttempts: 1}))),
		tool.Must(tool.New("wipe", func(_ context.Context, in wipeArgs) (string, error) {
			return "wiped " + in.Path, nil
		}, tool.RequiresApproval())))
}

// deadLetter makes a call of flaky as id, waits for its dead letter and
// for the index to have the call, and returns the call id and the letter's
// sequence.
func deadLetter(t *testing.T, u *uiStack, id identity.Identity, n int) (string, uint64) {
	t.Helper()
	r := call(t, u, id, "flaky", fmt.Sprintf(`{"n":%d,"token":%q}`, n, flakySecret))
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS, r.Response.GetError().GetType())
	var seq uint64
	waitFor(t, "the dead letter of "+r.CallId, func() bool {
		ls, err := u.UI.dlq.List(t.Context(), dlq.ListOptions{Tool: "flaky"})
		require.NoError(t, err)
		for _, l := range ls {
			if l.Record.GetCall().GetCallId() == r.CallId {
				seq = l.Seq
				return true
			}
		}
		return false
	})
	waitFor(t, "the index has "+r.CallId, func() bool { e, ok := u.UI.index.Get(r.CallId); return ok && e.Outcome == "dead_lettered" })
	return r.CallId, seq
}

// park submits a call of wipe as id, parked until an approver decides, and
// returns its id (the approval's).
func park(t *testing.T, u *uiStack, id identity.Identity, path string) string {
	t.Helper()
	sub, err := u.Dispatcher.Submit(t.Context(), id, &toolwirev1.CallRequest{Tool: "wipe", Session: "s-1",
		ArgumentsJson: fmt.Sprintf(`{"path":%q,"key":%q}`, path, wipeSecret)})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	require.NotNil(t, sub.Awaiting, "parked for an approver")
	return sub.CallID
}

// pendingMCPTool publishes an MCP tool disabled because its definition
// changed (to hash), as an MCP worker would.
func pendingMCPTool(t *testing.T, u *uiStack, name, hash string) {
	t.Helper()
	spec := &toolwirev1.ToolSpec{Name: name, Provider: "srv", Description: "looks things up", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP,
		Config:          &toolwirev1.ToolSpec_Mcp{Mcp: &toolwirev1.McpConfig{Server: "srv", Tool: "lookup", DefinitionHash: hash}},
		InputSchemaJson: `{"type":"object"}`, Disabled: true, DisabledReason: "definition changed"}
	_, err := registry.Publish(t.Context(), u.Env.Bus.Registry, []*toolwirev1.ToolSpec{spec})
	require.NoError(t, err)
	u.WaitTool(t, name)
}

// Every page answers a signed-in read-only key, and sends a browser
// without a session to the sign-in page; no page shows a secret argument,
// and a key of another tenant does not find the letter.
func TestPagesRenderSignedInAndRedirectWithout(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	call(t, u, acmeBot, "echo", `{"text":"hello"}`)
	_, seq := deadLetter(t, u, acmeBot, 1)
	park(t, u, acmeBot, "/tmp/a")
	pendingMCPTool(t, u, "mcp__srv__lookup", "newhash")
	letter := fmt.Sprintf("/ui/dlq/%d", seq)

	pages := []string{"/ui/dlq", "/ui/dlq?tool=flaky&q=UPSTREAM&since=1h", letter, "/ui/tools", "/ui/tools/echo",
		"/ui/tools/mcp__srv__lookup", "/ui/approvals", "/ui/limits", "/ui/limits?session=s-1"}
	reader := u.signIn(t, readerKey)
	anonymous := &browser{t: t, base: u.Srv.URL, c: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, p := range pages {
		res, body := reader.get(p)
		require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", p, body)
		require.Contains(t, body, `data-testid="who">acme/viewer<`, p)
		require.NotContains(t, body, flakySecret, "%s shows a secret argument", p)
		require.NotContains(t, body, wipeSecret, "%s shows a secret argument", p)

		res, _ = anonymous.get(p)
		require.Equal(t, http.StatusSeeOther, res.StatusCode, p)
		require.Equal(t, "/ui/signin?next="+url.QueryEscape(p), res.Header.Get("Location"), p)
	}

	_, body := reader.get("/ui/dlq?tool=flaky&q=upstream")
	require.Contains(t, body, fmt.Sprintf(`data-seq="%d"`, seq), "the reader's own tenant's letter")
	require.Contains(t, body, `data-testid="dlq-total">1<`)
	_, body = reader.get(letter)
	require.Contains(t, body, "[REDACTED]", "the secret argument is redacted")
	require.Contains(t, body, "upstream down")
	_, body = reader.get("/ui/tools/echo")
	require.NotRegexp(t, `<option[^>]*>[^<]*<time`, body, "a <time> inside an <option> is dropped")
	require.Regexp(t, `<option[^>]*>[^<]* · \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`, body, "a version's time, its zone named")
	_, body = reader.get("/ui/approvals")
	require.Contains(t, body, `data-testid="not-approver"`, "the dispatcher shows the inbox to approvers only")

	other := u.signIn(t, otherKey)
	res, _ := other.get(letter)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "another tenant's letter is not found")
	_, body = other.get("/ui/dlq")
	require.NotContains(t, body, fmt.Sprintf(`data-seq="%d"`, seq))
	res, _ = reader.get("/ui/dlq/nope")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, _ = reader.get("/ui/tools/no-such-tool")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

// actionsFixture holds one target of every dashboard action.
type actionsFixture struct {
	u                 *uiStack
	running, deadCall string // a call to cancel; a dead-lettered call
	seq               uint64 // its letter
	approval, mcpTool string
}

func newActionsFixture(t *testing.T) *actionsFixture {
	t.Helper()
	u := startUI(t, pageTools(), dispatch.Config{})
	f := &actionsFixture{u: u, mcpTool: "mcp__srv__lookup"}
	sub, err := u.Dispatcher.Submit(t.Context(), acmeBot, &toolwirev1.CallRequest{Tool: "hold"})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	f.running = sub.CallID
	waitFor(t, "the running call is indexed", func() bool { _, ok := u.UI.index.Get(f.running); return ok })
	f.deadCall, f.seq = deadLetter(t, u, acmeBot, 1)
	f.approval = park(t, u, acmeBot, "/srv")
	pendingMCPTool(t, u, f.mcpTool, "newhash")
	return f
}

type action struct {
	name, path string
	form       url.Values
}

// actions are every action of the dashboard, each on its target.
func (f *actionsFixture) actions() []action {
	seq := strconv.FormatUint(f.seq, 10)
	return []action{
		{"cancel call", "/ui/calls/" + f.running + "/cancel", url.Values{"reason": {"stuck"}}},
		{"bulk cancel dry run", "/ui/calls/cancel", url.Values{"tool": {"hold"}}},
		{"bulk cancel confirmed", "/ui/calls/cancel", url.Values{"confirm": {"1"}, "item": {f.running}, "count": {"1"}, "token": {"00"}}},
		{"retry call", "/ui/calls/" + f.deadCall + "/retry", nil},
		{"retry letter", "/ui/dlq/" + seq + "/retry", nil},
		{"bulk retry dry run", "/ui/dlq/retry", url.Values{"tool": {"flaky"}}},
		{"bulk retry confirmed", "/ui/dlq/retry", url.Values{"tool": {"flaky"}, "confirm": {"1"}, "seq": {seq}}},
		{"purge dry run", "/ui/dlq/purge", url.Values{"tool": {"flaky"}}},
		{"purge confirmed", "/ui/dlq/purge", url.Values{"tool": {"flaky"}, "confirm": {"1"}, "item": {seq}, "count": {"1"}, "token": {"00"}}},
		{"approve tool", "/ui/tools/" + f.mcpTool + "/approve", url.Values{"hash": {"newhash"}}},
		{"approve call", "/ui/approvals/" + f.approval + "/approve", url.Values{"mode": {"once"}}},
		{"deny call", "/ui/approvals/" + f.approval + "/deny", url.Values{"reason": {"no"}}},
		{"pause pool", "/ui/pools/native/pause", url.Values{"reason": {"incident"}}},
		{"resume pool", "/ui/pools/native/resume", nil},
	}
}

// state is what an action would change.
type state struct {
	calls      uint64 // messages in CALLS: a retry or an approved call adds one
	cancelled  bool   // the running call's cancel tombstone
	approval   toolwirev1.ApprovalState
	toolOK     bool // the MCP definition approved
	dlqLetters int
	paused     bool // the native pool's consumer
}

func (f *actionsFixture) state(t *testing.T) state {
	t.Helper()
	ctx := t.Context()
	u := f.u
	info, err := u.Env.Bus.Calls.Info(ctx)
	require.NoError(t, err)
	_, err = u.Env.Bus.Cancels.Get(ctx, bus.CancelKey(acmeBot.Tenant, f.running))
	require.True(t, err == nil || errors.Is(err, jetstream.ErrKeyNotFound), "%v", err)
	cancelled := err == nil
	a, err := u.Dispatcher.Approvals().GetApproval(ctx, identity.Identity{Tenant: "acme", Agent: "test", Scopes: []string{approvalflow.ApproveScope}}, f.approval)
	require.NoError(t, err)
	_, toolOK, err := registry.Approved(ctx, u.Env.Bus.Registry, f.mcpTool)
	require.NoError(t, err)
	ls, err := u.UI.dlq.List(ctx, dlq.ListOptions{})
	require.NoError(t, err)
	cons, err := u.Env.Bus.Calls.Consumer(ctx, u.Env.Bus.Config.PoolConsumer("native"))
	require.NoError(t, err)
	return state{calls: info.State.Msgs, cancelled: cancelled, approval: a.GetState(), toolOK: toolOK, dlqLetters: len(ls),
		paused: cons.CachedInfo().Paused}
}

// A key without the scope an action needs is refused, 403, on every
// action, and nothing changes: a read-only key on all of them, an
// approver's on the admins', another tenant's read-only key on all.
func TestReadOnlyKeyIsRefusedEveryAction(t *testing.T) {
	t.Parallel()
	f := newActionsFixture(t)
	before := f.state(t)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_PENDING, before.approval)
	require.False(t, before.cancelled)
	require.False(t, before.toolOK)

	adminOnly := map[string]bool{"cancel call": true, "bulk cancel dry run": true, "bulk cancel confirmed": true, "retry call": true, "retry letter": true, "bulk retry dry run": true,
		"bulk retry confirmed": true, "purge dry run": true, "purge confirmed": true, "approve tool": true,
		"pause pool": true, "resume pool": true}
	for _, who := range []struct {
		name, key string
		refused   func(action) bool
	}{
		{"read-only", readerKey, func(action) bool { return true }},
		{"other tenant read-only", otherKey, func(action) bool { return true }},
		{"approver", approverKey, func(a action) bool { return adminOnly[a.name] }},
	} {
		b := f.u.signIn(t, who.key)
		for _, a := range f.actions() {
			if !who.refused(a) {
				continue
			}
			t.Run(who.name+"/"+a.name, func(t *testing.T) {
				res, body := b.act(a.path, a.form)
				require.Equal(t, http.StatusForbidden, res.StatusCode, body)
				require.Regexp(t, `scopes?, which your key does not have`, body)
				require.Equal(t, before, f.state(t), "a refused action changed nothing")
			})
		}
	}
}

// An action without the session's CSRF token is refused, 403, even for an
// admin, and so is one with another session's token or from another site.
func TestActionsWithoutCSRFTokenAreRefused(t *testing.T) {
	t.Parallel()
	f := newActionsFixture(t)
	before := f.state(t)
	admin := f.u.signIn(t, adminKey)
	otherSession := f.u.signIn(t, adminKey).csrf()
	require.NotEqual(t, admin.csrf(), otherSession, "a token is bound to its sign-in")
	for _, a := range f.actions() {
		t.Run(a.name, func(t *testing.T) {
			form := url.Values{}
			for k, v := range a.form {
				form[k] = v
			}
			res, body := admin.post(a.path, form)
			require.Equal(t, http.StatusForbidden, res.StatusCode, "no token: %s", body)
			require.Contains(t, body, "CSRF token")
			form.Set("csrf", otherSession)
			res, _ = admin.post(a.path, form)
			require.Equal(t, http.StatusForbidden, res.StatusCode, "another session's token")
			require.Equal(t, before, f.state(t), "a refused action changed nothing")
		})
	}

	form := url.Values{"csrf": {admin.csrf()}}
	req, err := http.NewRequest(http.MethodPost, f.u.Srv.URL+"/ui/dlq/retry", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := admin.c.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode, "a form posted from another site")
	require.Equal(t, before, f.state(t))
}

var (
	hiddenSeqRe = regexp.MustCompile(`<input type="hidden" name="seq" value="(\d+)">`)
	createdRe   = regexp.MustCompile(`<tr data-seq="(\d+)"><td><a href="/ui/dlq/\d+">\d+</a></td><td>([0-9A-Z]+)</td><td><a href="/ui/calls/([0-9A-Z]+)"`)
)

// A bulk retry's dry run shows the exact count and the letters; the
// confirmation retries exactly those (not a letter that matched the
// filter since), as new calls whose admission names who asked, and lists
// them.
func TestBulkRetryConfirmsExactlyTheListedLetters(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	dead := map[uint64]string{}
	for i := range 3 {
		id, seq := deadLetter(t, u, acmeBot, i)
		dead[seq] = id
	}
	call(t, u, acmeBot, "echo", `{"text":"not dead"}`)
	admin := u.signIn(t, adminKey)

	res, body := admin.act("/ui/dlq/retry", url.Values{"tool": {"flaky"}, "q": {"upstream"}})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="count">3<`, "the exact count")
	require.Contains(t, body, `name="confirm" value="1"`)
	require.Contains(t, body, `name="tool" value="flaky"`, "the filter rides along")
	var listed []string
	for _, m := range hiddenSeqRe.FindAllStringSubmatch(body, -1) {
		listed = append(listed, m[1])
		seq, _ := strconv.ParseUint(m[1], 10, 64)
		require.Contains(t, dead, seq, "only the filter's letters are listed")
	}
	require.Len(t, listed, 3)

	lateID, lateSeq := deadLetter(t, u, acmeBot, 99) // matches the filter, after the dry run

	res, body = admin.act("/ui/dlq/retry", url.Values{"tool": {"flaky"}, "q": {"upstream"}, "confirm": {"1"}, "seq": listed})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="created-count">3<`)
	require.NotContains(t, body, `data-testid="failed-count"`)
	created := createdRe.FindAllStringSubmatch(body, -1)
	require.Len(t, created, 3, body)
	for _, m := range created {
		seq, _ := strconv.ParseUint(m[1], 10, 64)
		require.Equal(t, dead[seq], m[2], "the letter's own call was retried")
		require.NotEqual(t, lateSeq, seq, "a letter not listed is never retried")
		require.NotEqual(t, lateID, m[2])
		newID := m[3]
		waitFor(t, "the retry "+newID+" is indexed", func() bool { _, ok := u.UI.index.Get(newID); return ok })
		_, page := admin.get("/ui/calls/" + newID)
		require.Contains(t, page, fmt.Sprintf("retry of call %s from dead letter %d, asked by acme/ops (dashboard, bulk)", dead[seq], seq))
	}

	// The confirmation is bounded and checks what it is given.
	res, _ = admin.act("/ui/dlq/retry", url.Values{"confirm": {"1"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "no sequences")
	res, _ = admin.act("/ui/dlq/retry", url.Values{"confirm": {"1"}, "seq": {"12x"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "not a sequence")
	res, body = admin.act("/ui/dlq/retry", url.Values{"confirm": {"1"}, "seq": {"999999"}})
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `data-testid="failed-count">1<`, "no such letter: a failure, listed")
}

// A bulk retry acts on at most maxBulk letters, the newest, and its dry
// run says how many more match.
func TestBulkRetryIsCapped(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	subj := u.Env.Bus.Subjects
	var newest uint64
	for i := range maxBulk + 2 {
		c := &toolwirev1.ToolCall{CallId: ulid.Make().String(), Tool: "ghost", Arguments: []byte(`{}`), Provider: "builtin",
			Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, Caller: &toolwirev1.Caller{Tenant: "acme", Agent: "bot"}}
		data, err := proto.Marshal(&toolwirev1.DeadLetter{Call: c, Reason: fmt.Sprintf("letter %d", i), Attempts: 1, Time: timestamppb.Now()})
		require.NoError(t, err)
		ack, err := u.Env.Bus.JS.Publish(t.Context(), subj.DLQ(c.Executor, "acme", "builtin", "ghost"), data)
		require.NoError(t, err)
		newest = ack.Sequence
	}
	admin := u.signIn(t, adminKey)
	res, body := admin.act("/ui/dlq/retry", url.Values{"tool": {"ghost"}})
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, fmt.Sprintf(`data-testid="count">%d<`, maxBulk))
	require.Contains(t, body, fmt.Sprintf("%d match: a bulk retry acts on at most %d", maxBulk+2, maxBulk))
	seqs := hiddenSeqRe.FindAllStringSubmatch(body, -1)
	require.Len(t, seqs, maxBulk)
	require.Equal(t, strconv.FormatUint(newest, 10), seqs[0][1], "the newest first")

	many := make([]string, maxBulk+1)
	for i := range many {
		many[i] = strconv.Itoa(i + 1)
	}
	res, body = admin.act("/ui/dlq/retry", url.Values{"confirm": {"1"}, "seq": many})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, fmt.Sprintf("retries at most %d", maxBulk))
}

// The approval inbox shows the parked calls with their secret arguments
// redacted; approved once, a call runs; approved as a grant, the agent's
// next call runs without asking; denied, the caller is told the reason,
// which the page records with the approver.
func TestApprovalInboxApprovesOnceAsGrantAndDenies(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	once := park(t, u, acmeBot, "/srv/once")
	denied := park(t, u, acmeBot, "/srv/denied")
	granted := park(t, u, acmeBot, "/srv/granted")
	approver := u.signIn(t, approverKey)

	res, body := approver.get("/ui/approvals")
	require.Equal(t, http.StatusOK, res.StatusCode)
	for _, id := range []string{once, denied, granted} {
		require.Contains(t, body, `data-approval-id="`+id+`"`)
	}
	require.Contains(t, body, "/srv/once")
	require.NotContains(t, body, wipeSecret, "secret arguments are redacted")
	require.Contains(t, body, "the tool requires approval")

	res, _ = approver.act("/ui/approvals/"+once+"/approve", url.Values{"mode": {"once"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Contains(t, res.Header.Get("Location"), "/ui/approvals?done=")
	r, err := u.Dispatcher.GetResult(t.Context(), acmeBot, once, 20*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
	require.Contains(t, r.Response.GetContent()[0].GetText().GetText(), "wiped /srv/once")

	res, body = approver.act("/ui/approvals/"+denied+"/deny", url.Values{"reason": {" "}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "a denial needs a reason")
	require.Contains(t, body, "needs a reason")
	res, _ = approver.act("/ui/approvals/"+denied+"/deny", url.Values{"reason": {"not on a Friday"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	r, err = u.Dispatcher.GetResult(t.Context(), acmeBot, denied, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.GetError().GetType())
	require.Contains(t, r.Response.GetError().GetMessage(), "not on a Friday")

	res, body = approver.act("/ui/approvals/"+granted+"/approve", url.Values{"mode": {"grant"}, "scope": {"bogus"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode, body)
	res, _ = approver.act("/ui/approvals/"+granted+"/approve", url.Values{"mode": {"grant"}, "scope": {"agent"}, "ttl": {"1h"}, "args": {"path=/srv/*"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Contains(t, res.Header.Get("Location"), "granted")
	r, err = u.Dispatcher.GetResult(t.Context(), acmeBot, granted, 20*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
	next, err := u.Dispatcher.Call(t.Context(), acmeBot, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: `{"path":"/srv/later"}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, next.Response.GetOk(), "the grant covers the agent's next call: %v", next.Response.GetError())

	res, body = approver.get("/ui/approvals")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `data-testid="inbox-empty"`)
	row := func(id string) string {
		return regexp.MustCompile(`(?s)<tr data-approval-id="` + id + `">.*?</tr>`).FindString(body)
	}
	require.Regexp(t, `<td data-testid="state">denied</td><td>lead</td>.*\n.*<td data-testid="reason">not on a Friday</td>`, row(denied))
	require.Contains(t, row(once), `<td data-testid="state">approved</td><td>lead</td><td>once</td>`)
	require.Contains(t, row(granted), `<td data-testid="state">approved</td><td>lead</td><td>agent · grant`)

	res, _ = approver.act("/ui/approvals/"+once+"/approve", url.Values{})
	require.Equal(t, http.StatusConflict, res.StatusCode, "already decided")
	res, _ = approver.act("/ui/approvals/01J00000000000000000000C99/deny", url.Values{"reason": {"x"}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

// The diff of two versions of a spec shows the field that changed; the
// spec page hides configuration values that may be secret from admins and
// the whole configuration from others.
func TestToolDiffShowsAChangedField(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	spec := func(desc string) *toolwirev1.ToolSpec {
		return &toolwirev1.ToolSpec{Name: "report", Provider: "builtin", Description: desc, Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP,
			Config: &toolwirev1.ToolSpec_Http{Http: &toolwirev1.HttpConfig{Method: "POST", UrlTemplate: "https://bob:pa55w0rd@reports.example/run?api_key=k3y-s3cret",
				Headers: map[string]string{"Authorization": "Bearer hdr-s3cret"}, SecretHeaders: map[string]string{"X-Token": "env:REPORT_TOKEN"}}},
			InputSchemaJson: `{"type":"object","properties":{"month":{"type":"string"}}}`}
	}
	ctx := t.Context()
	v1, err := registry.Publish(ctx, u.Env.Bus.Registry, []*toolwirev1.ToolSpec{spec("counts the old way")})
	require.NoError(t, err)
	later := spec("counts the new way")
	later.InputSchemaJson = `{"type":"object","properties":{"month":{"type":"string"},"year":{"type":"integer"}}}`
	v2, err := registry.Publish(ctx, u.Env.Bus.Registry, []*toolwirev1.ToolSpec{later})
	require.NoError(t, err)
	waitFor(t, "the registry has the second version", func() bool {
		e, err := u.Registry.Get("report")
		return err == nil && e.Spec.Version == v2[0].Version
	})

	admin := u.signIn(t, installKey) // executor configuration is the installation's
	res, body := admin.get("/ui/tools/report")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="diff"`)
	require.Regexp(t, `<span class="del">-\s+&#34;description&#34;: &#34;counts the old way&#34;,</span>`, body)
	require.Regexp(t, `<span class="add">&#43;\s+&#34;description&#34;: &#34;counts the new way&#34;,</span>`, body)
	require.Regexp(t, `<span class="add">&#43;\s+&#34;year&#34;: \{</span>`, body, "a schema change is a line change")
	require.Contains(t, body, `data-version="`+v1[0].Version+`"`)
	for _, secret := range []string{"pa55w0rd", "k3y-s3cret", "hdr-s3cret"} {
		require.NotContains(t, body, secret, "a configuration value that may be secret")
	}
	require.Contains(t, body, "env:REPORT_TOKEN", "a secret header's reference is no secret")

	_, body = admin.get("/ui/tools/report?a=" + v2[0].Version + "&b=" + v1[0].Version)
	require.Regexp(t, `<span class="del">-\s+&#34;description&#34;: &#34;counts the new way&#34;,</span>`, body, "a and b swap")
	res, body = admin.get("/ui/tools/report?a=nope&b=" + v1[0].Version)
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, "no version nope")

	reader := u.signIn(t, readerKey)
	res, body = reader.get("/ui/tools/report")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "counts the new way")
	require.NotContains(t, body, "reports.example", "executor configuration is for admins")
	require.NotContains(t, body, "REPORT_TOKEN")
}

// An installation admin approves exactly the MCP definition the page
// shows; a stale hash is refused. A tenant's admin may not: a definition
// serves every tenant.
func TestApprovalOfAToolDefinition(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	pendingMCPTool(t, u, "mcp__srv__lookup", "newhash")
	tenantAdmin := u.signIn(t, adminKey)
	_, body := tenantAdmin.get("/ui/tools")
	require.NotContains(t, body, `value="newhash"`, "a tenant's admin is not shown the definition hash")
	res, body := tenantAdmin.act("/ui/tools/mcp__srv__lookup/approve", url.Values{"hash": {"newhash"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, body)
	require.Contains(t, body, "what every tenant shares")
	_, ok, err := registry.Approved(t.Context(), u.Env.Bus.Registry, "mcp__srv__lookup")
	require.NoError(t, err)
	require.False(t, ok, "a tenant's admin approves no definition")

	admin := u.signIn(t, installKey)
	_, body = admin.get("/ui/tools")
	require.Regexp(t, `data-tool="mcp__srv__lookup"[\s\S]*name="hash" value="newhash"`, body)

	res, body = admin.act("/ui/tools/mcp__srv__lookup/approve", url.Values{"hash": {"oldhash"}})
	require.Equal(t, http.StatusConflict, res.StatusCode)
	require.Contains(t, body, "newhash")
	res, _ = admin.act("/ui/tools/echo/approve", url.Values{"hash": {"x"}})
	require.Equal(t, http.StatusConflict, res.StatusCode, "a native tool has no definition to approve")
	res, _ = admin.act("/ui/tools/no-such/approve", url.Values{"hash": {"x"}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	_, ok, err = registry.Approved(t.Context(), u.Env.Bus.Registry, "mcp__srv__lookup")
	require.NoError(t, err)
	require.False(t, ok, "nothing approved by a refused request")

	res, _ = admin.act("/ui/tools/mcp__srv__lookup/approve", url.Values{"hash": {"newhash"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	got, ok, err := registry.Approved(t.Context(), u.Env.Bus.Registry, "mcp__srv__lookup")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "newhash", got)
	_, body = admin.get("/ui/tools")
	require.Contains(t, body, `data-testid="no-pending"`, "approved: awaiting nothing")
	// The registry records who approved, and the tool's page says so.
	by, ok, err := registry.ApprovedBy(t.Context(), u.Env.Bus.Registry, "mcp__srv__lookup")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "newhash", by.Hash)
	require.Equal(t, "acme/root", by.By)
	_, body = admin.get("/ui/tools/mcp__srv__lookup")
	require.Regexp(t, `data-testid="approver">by acme/root at `, body)
}

// The pools page shows each pool's figures and sparklines of its last
// samples, with the workers that answered and the errors among the
// finished calls.
func TestPagesPoolsShowSparklinesAndWorkers(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	ok := call(t, u, acmeBot, "echo", `{"text":"a"}`)
	call(t, u, acmeBot, "echo", `{"text":"b"}`)
	call(t, u, acmeBot, "flaky", `{"n":1,"token":"x"}`)
	worker := ok.Response.GetMeta().GetWorker()
	require.NotEmpty(t, worker)
	pools := u.Dispatcher.Pools()
	require.NotEmpty(t, pools)
	pool := u.Dispatcher.PoolOf("acme", mustSpec(t, u, "echo"))
	require.NotEmpty(t, pool, "admission routes echo to a pool")

	h := u.UI.pools
	waitFor(t, "the three finished calls are counted", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.done[pool] >= 3
	})
	h.sample(t.Context(), time.Now()) // as the ticker would, at its next tick

	for _, key := range []string{readerKey, adminKey, globexAdmin} {
		res, body := u.signIn(t, key).get("/ui/pools")
		require.Equal(t, http.StatusForbidden, res.StatusCode, "the pools count every tenant's calls: %s", body)
		require.Contains(t, body, `needs a key with the &#34;installation&#34; scope`)
		require.NotContains(t, body, `href="/ui/pools"`, "no link to a page the key may not see")
	}
	res, body := u.signIn(t, installKey).get("/ui/pools")
	require.Equal(t, http.StatusOK, res.StatusCode)
	card := regexp.MustCompile(`(?s)data-pool="` + regexp.QuoteMeta(pool) + `">.*?</table>`).FindString(body)
	require.NotEmpty(t, card, body)
	require.Regexp(t, `data-name="finished">\s*<span class="muted">finished</span> <b>[1-9][0-9.]*/min</b>`, card)
	require.Regexp(t, `data-name="error rate">\s*<span class="muted">error rate</span> <b>33.3%</b>`, card, "one of three failed")
	require.Regexp(t, `<polyline points="\d+,[\d.]+ \d+,[\d.]+`, card)
	require.Contains(t, card, `data-worker="`+worker+`"`)
	require.Contains(t, body, `data-testid="stores"`)
}

func mustSpec(t *testing.T, u *uiStack, name string) *toolwirev1.ToolSpec {
	t.Helper()
	e, err := u.Registry.Get(name)
	require.NoError(t, err)
	return e.Spec
}

// The limits page shows each limit's use against its cap as a meter: an
// admin every recent agent's, another key its own agent's only.
func TestPagesLimitsShowUsageMeters(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	a, err := policystore.NewStore(u.Env.Bus, nil).Apply(t.Context(), policystore.Installation, []byte(`limits:
  - id: daily
    key: agent
    budget: {units: 10, window: 24h}
    reason: ten calls a day
  - id: slow
    key: agent
    rate: {count: 100, per: 1m, burst: 5}
  - id: wide
    key: tenant
    concurrency: 4
`), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, u.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	call(t, u, acmeBot, "echo", `{"text":"1"}`)
	call(t, u, acmeBot, "echo", `{"text":"2"}`)
	call(t, u, globexBot, "echo", `{"text":"3"}`)
	waitFor(t, "the index has the calls", func() bool { return u.UI.index.Stats().Entries >= 3 })

	admin := u.signIn(t, adminKey)
	res, body := admin.get("/ui/limits?tenant=globex")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-tenant="acme"`)
	require.NotContains(t, body, `data-tenant="globex"`, "a tenant's admin sees its own tenant's agents only")
	_, body = u.signIn(t, installKey).get("/ui/limits")
	require.Contains(t, body, `data-tenant="globex"`, "the installation scope sees every tenant's agents")
	res, body = admin.get("/ui/limits")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, "2 of 10 units used this 24h0m0s window")
	require.Contains(t, body, `aria-valuenow="20"`)
	require.Contains(t, body, "100 per 1m0s, burst 5")
	require.Contains(t, body, "0 of 4 in flight")

	reader := u.signIn(t, readerKey)
	res, body = reader.get("/ui/limits?tenant=globex&agent=bot")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NotContains(t, body, `data-tenant="globex"`, "not an admin: their own tenant and agent only")
	require.Contains(t, body, "Agent viewer")
	require.Contains(t, body, "0 of 10 units used")
}

// A Retry (of a call, of a letter, in bulk) is decided as an approval of
// a parked call is: a call the session's mode now forbids is refused
// MODE_RESTRICTED, a call whose session has ended SESSION_INACTIVE, the
// operator is told why, and nothing is queued (the calls stream's last
// sequence is unchanged).
func TestRetryIsRefusedWhenTheSessionForbidsIt(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	u.ApplyPolicy(t, "tenant:\n  default: allow\nmodes:\n  voice:\n    rules:\n"+
		"      - {id: voice-no-flaky, effect: deny, tools: [flaky], reason: not during a call}\n")
	id0, seq0 := deadLetter(t, u, acmeBot, 0) // session s-acme
	_, seq1 := deadLetter(t, u, acmeBot, 1)
	_, err := u.Dispatcher.SetSessionMode(t.Context(), acmeBot, "s-acme", "voice")
	require.NoError(t, err)
	before, err := u.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	admin := u.signIn(t, adminKey)

	res, body := admin.act(fmt.Sprintf("/ui/dlq/%d/retry", seq0), nil)
	require.Equal(t, http.StatusConflict, res.StatusCode, body)
	require.Contains(t, body, "retry refused, nothing was queued")
	require.Contains(t, body, "MODE_RESTRICTED")
	require.Contains(t, body, "voice-no-flaky")

	_, err = u.Dispatcher.EndSession(t.Context(), acmeBot, "s-acme", "the caller hung up")
	require.NoError(t, err)
	for _, path := range []string{"/ui/calls/" + id0 + "/retry", fmt.Sprintf("/ui/dlq/%d/retry", seq1)} {
		res, body = admin.act(path, nil)
		require.Equal(t, http.StatusConflict, res.StatusCode, path+": "+body)
		require.Contains(t, body, "retry refused, nothing was queued", path)
		require.Contains(t, body, "SESSION_INACTIVE", path)
		require.Contains(t, body, "the caller hung up", path)
	}
	res, body = admin.act("/ui/dlq/retry", url.Values{"confirm": {"1"}, "seq": {strconv.FormatUint(seq0, 10), strconv.FormatUint(seq1, 10)}})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="failed-count">2<`, body)
	require.Contains(t, body, "SESSION_INACTIVE")

	after, err := u.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, before.State.LastSeq, after.State.LastSeq, "nothing was queued")
}
