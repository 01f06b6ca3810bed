package dispatchd_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/dispatchd/dispatchdtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/toolctl"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

// facesKey is one key of the key file the faces test's dispatcher reads.
type facesKey struct{ tenant, agent, scopes string }

// facesKeys are the keys, by their secret: two agents and the admin of
// tenant ta, the admin and an agent of tenant tb, and the installation's
// operator (tenant ops).
var facesKeys = map[string]facesKey{
	"a-bot":   {"ta", "bot-a", "[tools]"},
	"a-bot2":  {"ta", "bot-a2", "[tools]"},
	"a-admin": {"ta", "ops-a", `["*"]`},
	"b-admin": {"tb", "ops-b", `["*"]`},
	"b-bot":   {"tb", "bot-b", "[tools]"},
	"root":    {"ops", "root", `["*", installation]`},
}

// faces is a dispatcher process (dispatchd.Run: the API, the MCP endpoint
// and the dashboard on one address, native workers in process) with the
// facesKeys.
type faces struct {
	t    *testing.T
	base string // http://host:port
	api  toolwirev1connect.DispatcherServiceClient
}

// startFaces runs the dispatcher with extra settings applied to its
// RunConfig, stopped when the test ends.
func startFaces(t *testing.T, configure func(*dispatchd.RunConfig)) *faces {
	t.Helper()
	dir := t.TempDir()
	var keys strings.Builder
	keys.WriteString("keys:\n")
	for secret, k := range facesKeys {
		sum := sha256.Sum256([]byte(secret))
		fmt.Fprintf(&keys, "  - {sha256: %s, tenant: %s, agent: %s, scopes: %s}\n", hex.EncodeToString(sum[:]), k.tenant, k.agent, k.scopes)
	}
	keyFile := filepath.Join(dir, "keys.yaml")
	require.NoError(t, os.WriteFile(keyFile, []byte(keys.String()), 0o600))
	workerConfig := filepath.Join(dir, "worker.yaml")
	require.NoError(t, os.WriteFile(workerConfig, []byte("pools: [{type: native}]\n"), 0o600))
	rc := dispatchd.RunConfig{DataDir: filepath.Join(dir, "data"), HTTPAddr: "127.0.0.1:0", Workers: "native", Grace: 10 * time.Second,
		WorkerConfig: workerConfig, Tools: builtin.Tools(), APIKeysFile: keyFile, Logger: slog.New(slog.DiscardHandler)}
	if configure != nil {
		configure(&rc)
	}
	base := "http://" + dispatchdtest.Start(t, rc).Addr
	return &faces{t: t, base: base, api: toolwirev1connect.NewDispatcherServiceClient(http.DefaultClient, base)}
}

// as is req with key as its bearer key.
func as[T any](key string, req *T) *connect.Request[T] {
	r := connect.NewRequest(req)
	r.Header().Set("Authorization", "Bearer "+key)
	return r
}

// redacted is s with callID replaced by ID: answers about two ids compare
// equal when they say the same.
func redacted(s, callID string) string { return strings.ReplaceAll(s, callID, "ID") }

// connectAnswer is a Connect error's code and message, or "ok".
func connectAnswer(err error, callID string) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(err).String() + " " + redacted(err.Error(), callID)
}

// apiAnswers are the API's answers to key about callID, on every RPC
// that takes a call id (GetResult with and without a wait, GetOutput,
// Watch, ApplyIntents, GetApproval, Cancel).
func (f *faces) apiAnswers(key, callID string) []string {
	t := f.t
	ctx := t.Context()
	var out []string
	for _, wait := range []time.Duration{0, time.Second} {
		g, err := f.api.GetResult(ctx, as(key, &toolwirev1.GetResultRequest{CallId: callID, Wait: durationpb.New(wait)}))
		if err == nil {
			out = append(out, "GetResult "+g.Msg.State.String())
			continue
		}
		out = append(out, "GetResult "+connectAnswer(err, callID))
	}
	_, err := f.api.GetOutput(ctx, as(key, &toolwirev1.GetOutputRequest{CallId: callID}))
	out = append(out, "GetOutput "+connectAnswer(err, callID))
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond) // a visible running call streams until cancelled
	defer cancel()
	stream, err := f.api.Watch(wctx, as(key, &toolwirev1.WatchRequest{CallId: callID}))
	require.NoError(t, err)
	events := 0
	for stream.Receive() {
		events++
	}
	if events > 0 {
		out = append(out, "Watch events")
	} else {
		out = append(out, "Watch "+connectAnswer(stream.Err(), callID))
	}
	_ = stream.Close()
	_, err = f.api.ApplyIntents(ctx, as(key, &toolwirev1.ApplyIntentsRequest{CallId: callID}))
	out = append(out, "ApplyIntents "+connectAnswer(err, callID))
	_, err = f.api.GetApproval(ctx, as(key, &toolwirev1.GetApprovalRequest{Id: callID}))
	out = append(out, "GetApproval "+connectAnswer(err, callID))
	return out
}

// apiCancel is the API's Cancel answer to key about callID.
func (f *faces) apiCancel(key, callID string) string {
	c, err := f.api.Cancel(f.t.Context(), as(key, &toolwirev1.CancelRequest{CallId: callID, Reason: "by " + key}))
	if err != nil {
		return "Cancel " + connectAnswer(err, callID)
	}
	return "Cancel " + c.Msg.Outcome.String()
}

// mcpRPC posts one JSON-RPC request of the 2026-07-28 revision (with the
// Tasks extension declared) to /mcp as key, and returns its result or
// its error as text, callID redacted.
func (f *faces) mcpRPC(key, method, name string, params map[string]any, callID string) (map[string]any, string) {
	t := f.t
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{
			"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.base+"/mcp", bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name, "Authorization": "Bearer " + key} {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	require.NoError(t, err)
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if data, ok := strings.CutPrefix(line, "data:"); ok {
				raw = []byte(strings.TrimSpace(data))
			}
		}
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(raw, &msg), "%d %s", res.StatusCode, raw)
	if msg.Error != nil {
		return nil, redacted(fmt.Sprintf("%d %d %s", res.StatusCode, msg.Error.Code, msg.Error.Message), callID)
	}
	return msg.Result, ""
}

// mcpAnswers are the MCP endpoint's answers to key about callID: its
// output resource, and the task of that id (tasks/get).
func (f *faces) mcpAnswers(key, callID string) []string {
	uri := "toolwire://calls/" + callID + "/output"
	var out []string
	r, e := f.mcpRPC(key, "resources/read", uri, map[string]any{"uri": uri}, callID)
	out = append(out, "resources/read "+mcpAnswer(r, e))
	r, e = f.mcpRPC(key, "tasks/get", callID, map[string]any{"taskId": callID}, callID)
	if e == "" {
		return append(out, fmt.Sprint("tasks/get ", r["status"]))
	}
	return append(out, "tasks/get "+e)
}

func mcpAnswer(r map[string]any, e string) string {
	if e != "" {
		return e
	}
	return fmt.Sprint("ok ", r["contents"] != nil)
}

// mcpCancel is tasks/cancel's answer to key about callID.
func (f *faces) mcpCancel(key, callID string) string {
	r, e := f.mcpRPC(key, "tasks/cancel", callID, map[string]any{"taskId": callID}, callID)
	return "tasks/cancel " + mcpAnswer(r, e)
}

// browser is a dashboard session.
type browser struct {
	f *faces
	c *http.Client
}

// signIn signs in to the dashboard with key.
func (f *faces) signIn(key string) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(f.t, err)
	b := &browser{f: f, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	res, _ := b.do(http.MethodPost, "/ui/signin", url.Values{"key": {key}})
	require.Equal(f.t, http.StatusSeeOther, res.StatusCode, "sign-in with %s", key)
	return b
}

func (b *browser) do(method, path string, form url.Values) (*http.Response, string) {
	t := b.f.t
	req, err := http.NewRequestWithContext(t.Context(), method, b.f.base+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.f.base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	res, err := b.c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(body)
}

var (
	csrfRe  = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	errorRe = regexp.MustCompile(`data-testid="error">([^<]*)<`)
)

// act posts a dashboard action with the session's CSRF token.
func (b *browser) act(path string) (*http.Response, string) {
	_, page := b.do(http.MethodGet, "/ui/calls", nil)
	m := csrfRe.FindStringSubmatch(page)
	require.NotNil(b.f.t, m, "no CSRF token on the calls page")
	return b.do(http.MethodPost, path, url.Values{"csrf": {m[1]}, "reason": {"mine now"}})
}

// pageAnswer is a dashboard answer: its status and, for an error, its
// text; a page shown is "200" with whether the call id is on it.
func pageAnswer(res *http.Response, body, callID string) string {
	if m := errorRe.FindStringSubmatch(body); m != nil {
		return fmt.Sprint(res.StatusCode, " ", redacted(html.UnescapeString(m[1]), callID))
	}
	return fmt.Sprint(res.StatusCode, " shown ", strings.Contains(body, callID))
}

// dashboardAnswers are the dashboard's answers to the session about
// callID: the call's page, the calls page filtered on its tenant, the
// retry action and the approval decisions by that id.
func (b *browser) answers(callID, tenant string) []string {
	var out []string
	res, body := b.do(http.MethodGet, "/ui/calls/"+callID, nil)
	out = append(out, "call page "+pageAnswer(res, body, callID))
	_, body = b.do(http.MethodGet, "/ui/calls?tenant="+tenant, nil)
	out = append(out, fmt.Sprint("listed ", strings.Contains(body, callID)))
	for _, action := range []string{"/ui/calls/" + callID + "/retry", "/ui/approvals/" + callID + "/approve", "/ui/approvals/" + callID + "/deny"} {
		res, body := b.act(action)
		out = append(out, redacted(action, callID)+" "+pageAnswer(res, body, callID))
	}
	return out
}

// cancel is the dashboard's cancel action's answer about callID.
func (b *browser) cancel(callID string) string {
	res, body := b.act("/ui/calls/" + callID + "/cancel")
	if res.StatusCode == http.StatusSeeOther {
		return "cancel " + redacted(res.Header.Get("Location"), callID)
	}
	return "cancel " + pageAnswer(res, body, callID)
}

// toolctl runs toolctl in process against the dispatcher as key and
// returns its exit code and output, callID redacted.
func (f *faces) toolctl(key, callID string, args ...string) string {
	var stdout, stderr bytes.Buffer
	code := toolctl.Run(f.t.Context(), append([]string{"--server", f.base, "--api-key", key}, args...),
		toolctl.IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr})
	return fmt.Sprintf("%s: %d %s", args[0], code, redacted(stdout.String()+stderr.String(), callID))
}

// toolctlAnswers are toolctl's answers to key about callID, on every
// command that takes a call id but cancel.
func (f *faces) toolctlAnswers(key, callID string) []string {
	var out []string
	for _, args := range [][]string{{"get", callID}, {"get", callID, "--wait", "1s"}, {"output", callID},
		{"session", "apply", callID}, {"approvals", "show", callID}} {
		out = append(out, f.toolctl(key, callID, args...))
	}
	wctx, cancel := context.WithTimeout(f.t.Context(), 500*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := toolctl.Run(wctx, []string{"--server", f.base, "--api-key", key, "watch", callID},
		toolctl.IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr})
	if strings.Contains(stdout.String(), " ACCEPTED") {
		return append(out, "watch: streaming") // a visible running call, until the deadline
	}
	return append(out, fmt.Sprintf("watch: %d %s", code, redacted(stdout.String()+stderr.String(), callID)))
}

// everyFace is every face's answers (cancel aside) to key about callID
// of tenant, signed in to the dashboard as b.
func (f *faces) everyFace(key string, b *browser, callID, tenant string) map[string][]string {
	return map[string][]string{
		"api": f.apiAnswers(key, callID), "mcp": f.mcpAnswers(key, callID),
		"dashboard": b.answers(callID, tenant), "toolctl": f.toolctlAnswers(key, callID),
	}
}

// taCalls makes the calls of tenant ta the faces test asks about, as
// a-bot: a finished call (the API's Call) and a running one (an MCP task
// of sleep), each indexed by the dashboard by the time it returns.
func (f *faces) taCalls() (done, running string) {
	t := f.t
	var c *connect.Response[toolwirev1.CallResponse]
	require.Eventually(t, func() bool { // the in-process worker's tools reach the registry
		var err error
		c, err = f.api.Call(t.Context(), as("a-bot", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`}))
		return err == nil && c.Msg.State == toolwirev1.CallState_CALL_STATE_DONE
	}, time.Minute, 50*time.Millisecond)
	task, e := f.mcpRPC("a-bot", "tools/call", "sleep", map[string]any{"name": "sleep", "arguments": map[string]any{"duration": "5m"}}, "")
	require.Empty(t, e)
	require.Equal(t, "task", task["resultType"], "%v", task)
	done, running = c.Msg.CallId, task["taskId"].(string)
	root := f.signIn("root")
	for _, id := range []string{done, running} {
		require.Eventually(t, func() bool { // the dashboard indexed the call
			res, _ := root.do(http.MethodGet, "/ui/calls/"+id, nil)
			return res.StatusCode == http.StatusOK
		}, time.Minute, 50*time.Millisecond)
	}
	return done, running
}

// outOfReach asserts that every face answers key about each of ids —
// every RPC, page, action and command, cancel included — exactly as it
// answers about an id nobody minted (byte for byte once the id is
// replaced), and that answer is NOT_FOUND (or the scope an action needs).
func (f *faces) outOfReach(key string, ids ...string) {
	t := f.t
	b := f.signIn(key)
	madeUp := ulid.Make().String()
	want := f.everyFace(key, b, madeUp, "ta")
	t.Logf("%s about a made-up id: %q", key, want)
	for face, answers := range want {
		for _, a := range answers {
			// NOT_FOUND, or (a key without the scope) the scope an
			// approval or retry needs.
			require.Regexp(t, `(?i)not.found| 404 |listed false|unknown task|permission_denied| 403 `, a, "%s on %s", key, face)
			require.NotRegexp(t, `(?i)pending|has not finished|shown true|listed true`, a, "%s on %s", key, face)
		}
	}
	for _, id := range ids {
		require.Equal(t, want, f.everyFace(key, b, id, "ta"), "%s about ta's call", key)
	}
	cancels := func(id string) []string {
		return []string{f.apiCancel(key, id), f.mcpCancel(key, id), b.cancel(id), f.toolctl(key, id, "cancel", id)}
	}
	wantCancel := cancels(madeUp)
	t.Logf("%s cancelling a made-up id: %q", key, wantCancel)
	for _, id := range ids {
		require.Equal(t, wantCancel, cancels(id), "%s cancelling ta's call", key)
	}
}

// inReach asserts that every face shows key both calls of ta.
func (f *faces) inReach(key, done, running string) {
	t := f.t
	b := f.signIn(key)
	got := f.everyFace(key, b, done, "ta")
	require.Contains(t, got["api"], "GetResult CALL_STATE_DONE", key)
	require.Contains(t, got["mcp"], "resources/read ok true", key)
	require.Contains(t, got["dashboard"], "call page 200 shown true", key)
	require.Contains(t, got["dashboard"], "listed true", key)
	require.Contains(t, got["toolctl"], "get: 0 hi\n", key)
	got = f.everyFace(key, b, running, "ta")
	require.Contains(t, got["api"], "GetResult CALL_STATE_PENDING", key)
	require.Contains(t, got["api"], "Watch events", key)
	require.Contains(t, got["mcp"], "tasks/get working", key)
	require.Contains(t, got["dashboard"], "call page 200 shown true", key)
	require.Contains(t, got["toolctl"], "watch: streaming", key)
}

// stillRunning asserts that ta's running call was not cancelled, then
// has ta's admin cancel it from the dashboard.
func (f *faces) stillRunning(running string) {
	t := f.t
	g, err := f.api.GetResult(t.Context(), as("a-bot", &toolwirev1.GetResultRequest{CallId: running}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_PENDING, g.Msg.State, "ta's call runs on, uncancelled")
	require.Equal(t, "cancel /ui/calls/ID?done=requested", f.signIn("a-admin").cancel(running), "ta's admin cancels it")
	g, err = f.api.GetResult(t.Context(), as("a-bot", &toolwirev1.GetResultRequest{CallId: running, Wait: durationpb.New(time.Minute)}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.Msg.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, g.Msg.Response.GetError().GetType())
}

// The API, the MCP endpoint, the dashboard and toolctl, driven with the
// same keys against one dispatcher, draw the same tenant line: another
// tenant's call id — finished, or running as an MCP task — answers on
// every RPC, page, action and command exactly as an id nobody minted
// does (NOT_FOUND, byte for byte once the id is replaced), and cancelling
// it from any face leaves it running. With the default agent visibility
// (tenant) every key of the tenant — its agents and its admin — sees
// both calls on every face, and the installation key sees them where a
// face shows several tenants (the dashboard; through the API it acts as
// its own tenant) (issue 28).
func TestEveryFaceDrawsTheSameTenantLine(t *testing.T) {
	t.Parallel()
	f := startFaces(t, nil)
	done, running := f.taCalls()
	f.outOfReach("b-admin", done, running)
	f.outOfReach("b-bot", done, running)
	for _, key := range []string{"a-bot", "a-bot2", "a-admin"} {
		f.inReach(key, done, running)
	}
	root := f.signIn("root")
	require.Equal(t, []string{"call page 200 shown true", "listed true"}, root.answers(done, "ta")[:2])
	require.Contains(t, f.apiAnswers("root", done), `GetResult not_found not_found: dispatch: unknown call "ID"`)
	f.stillRunning(running)
}

// With --agent-visibility own, an agent's key sees its own agent's calls
// only, on every face alike: another agent's call of its tenant answers
// as a made-up id, as another tenant's does; the tenant's admin (and any
// key with the admin or approve scope) and the installation key still
// see the whole tenant (issue 28).
func TestAgentVisibilityOwnHoldsOnEveryFace(t *testing.T) {
	t.Parallel()
	f := startFaces(t, func(rc *dispatchd.RunConfig) { rc.Dispatcher.AgentVisibility = identity.VisibilityOwn })
	done, running := f.taCalls()
	f.outOfReach("a-bot2", done, running)
	f.outOfReach("b-admin", done, running)
	for _, key := range []string{"a-bot", "a-admin"} {
		f.inReach(key, done, running)
	}
	root := f.signIn("root")
	require.Equal(t, []string{"call page 200 shown true", "listed true"}, root.answers(done, "ta")[:2])
	f.stillRunning(running)
}
