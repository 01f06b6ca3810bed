package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// greet is the tool of the tests: version one is served by the stack's
// worker; upgrade registers a second version, which no worker serves
// (a worker runs the one version it serves), so the version a call was
// admitted with is read from the calls stream (admitted).
func greet() *tool.Tool {
	return tool.Must(tool.New("greet", func(_ context.Context, _ struct{}) (map[string]any, error) {
		return map[string]any{"said": "hello"}, nil
	}, tool.WithDescription("Greets, version one."), tool.ReadOnly()))
}

// pinStack is a stack serving greet, the calls it publishes, and ways to
// call greet.
type pinStack struct {
	*dispatchtest.Stack
	t     *testing.T
	calls chan *nats.Msg
}

func startPinStack(t *testing.T) pinStack {
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), greet())})
	calls := make(chan *nats.Msg, 64)
	sub, err := s.Env.Bus.NC.ChanSubscribe(s.Env.Bus.Subjects.AllCalls(), calls)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, s.Env.Bus.NC.Flush())
	return pinStack{Stack: s, t: t, calls: calls}
}

// request is a call of greet in session (pinning when pin), with
// spec_version.
func request(session string, pin bool, version string) *toolwirev1.CallRequest {
	return &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{}`, Session: session, PinSessionVersions: pin, SpecVersion: version}
}

// call calls greet and waits for the response (one the worker ran, or a
// refusal at admission).
func (s pinStack) call(session string, pin bool, version string) *toolwirev1.ToolResponse {
	s.t.Helper()
	r, err := s.Dispatcher.Call(s.t.Context(), identity.Default, request(session, pin, version), 60*time.Second)
	require.NoError(s.t, err)
	return r.Response
}

// admitted submits a call of greet and returns the spec version it was
// published with (then cancels it: no worker may serve that version).
func (s pinStack) admitted(session string, pin bool) string {
	s.t.Helper()
	sub, err := s.Dispatcher.Submit(s.t.Context(), identity.Default, request(session, pin, ""))
	require.NoError(s.t, err)
	require.Nil(s.t, sub.Rejected, "%v", sub.Rejected.GetError())
	defer func() { _, _ = s.Dispatcher.Cancel(s.t.Context(), identity.Default, sub.CallID, "test") }()
	for {
		select {
		case m := <-s.calls:
			var call toolwirev1.ToolCall
			require.NoError(s.t, proto.Unmarshal(m.Data, &call))
			if call.CallId == sub.CallID {
				return call.SpecVersion
			}
		case <-time.After(30 * time.Second):
			s.t.Fatal("the call was never published")
		}
	}
}

// upgrade registers a new version of greet (its description changed) and
// waits until a call without a session is admitted with it; it returns
// the old version and the new.
func (s pinStack) upgrade() (string, string) {
	s.t.Helper()
	e, err := s.Registry.Get("greet")
	require.NoError(s.t, err)
	spec := proto.CloneOf(e.Spec)
	spec.Description = "Greets, version two."
	out, err := registry.Publish(s.t.Context(), s.Env.Bus.Registry, []*toolwirev1.ToolSpec{spec})
	require.NoError(s.t, err)
	v2 := out[0].Version
	pollSubmit(s.t, func() bool { return s.admitted("", false) == v2 }, "the dispatcher admits the current version")
	return e.Spec.Version, v2
}

// A session that pins versions runs the version its first call resolved
// after the registry changes; a session that did not pin, a fresh
// session and a call without a session run the current version. The pin
// is in the session's record, and another replica reads it; a
// spec_version other than the pin is a conflict; the orchestrator's
// re-pin lets the session pick the current version up.
func TestPinnedVersionHoldsWithinTheSession(t *testing.T) {
	t.Parallel()
	s := startPinStack(t)
	ctx := t.Context()

	r := s.call("s-pinned", true, "")
	require.True(t, r.GetOk(), "%v", r.GetError())
	v1 := r.GetMeta().GetSpecVersion()
	require.True(t, s.call("s-free", false, "").GetOk())
	sess, err := s.Dispatcher.GetSession(ctx, identity.Default, "s-pinned")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"greet": v1}, sess.GetPinnedVersions())

	old, v2 := s.upgrade()
	require.Equal(t, v1, old)

	for range 3 {
		r = s.call("s-pinned", true, "")
		require.True(t, r.GetOk(), "%v", r.GetError())
		require.Equal(t, v1, r.GetMeta().GetSpecVersion(), "the session runs the version it pinned")
	}
	require.Equal(t, v2, s.admitted("s-free", false), "a session that did not pin runs the current version")
	require.Equal(t, v2, s.admitted("", true), "a call without a session runs the current version")
	require.Equal(t, v2, s.admitted("s-new", true), "a new session pins the current version")
	require.Equal(t, v2, s.admitted("s-new", true))

	// Another replica reads the pin from the bucket.
	other := s.StartDispatcher(t, dispatch.Config{})
	r2, err := other.Call(ctx, identity.Default, request("s-pinned", true, ""), 60*time.Second)
	require.NoError(t, err)
	require.Equal(t, v1, r2.GetResponse().GetMeta().GetSpecVersion())

	// An explicit spec_version other than the pin is a conflict; the pin's own is fine.
	r = s.call("s-pinned", true, v2)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetMessage(), `session "s-pinned" pins spec version "`+v1+`" of tool "greet"`)
	require.Contains(t, r.GetError().GetSuggestion(), "toolctl session repin s-pinned greet")
	require.Equal(t, v1, s.call("s-pinned", true, v1).GetMeta().GetSpecVersion())

	// Re-pin: the orchestrator clears the pin; the next call pins the current version.
	_, err = s.Dispatcher.ClearSessionPins(ctx, identity.Identity{Tenant: identity.Default.Tenant, Agent: "bot", Scopes: []string{"tools"}}, "s-pinned", "")
	require.ErrorIs(t, err, dispatch.ErrNotAdmin)
	sess, err = s.Dispatcher.ClearSessionPins(ctx, identity.Default, "s-pinned", "greet")
	require.NoError(t, err)
	require.Empty(t, sess.GetPinnedVersions())
	require.Equal(t, v2, s.admitted("s-pinned", true))
	sess, err = s.Dispatcher.GetSession(ctx, identity.Default, "s-pinned")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"greet": v2}, sess.GetPinnedVersions())
}

// The policy turns pinning on (sessions.pin_versions), here for the
// sessions in the voice mode, so that callers need not ask for it; a
// session the layer does not apply to is not pinned.
func TestPolicyPinsVersions(t *testing.T) {
	t.Parallel()
	s := startPinStack(t)
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation, []byte(`
tenant:
  default: allow
modes:
  voice:
    sessions: {pin_versions: true}
`), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	s.SetMode(t, "s-voice", "voice")
	r := s.call("s-voice", false, "")
	require.True(t, r.GetOk(), "%v", r.GetError())
	v1 := r.GetMeta().GetSpecVersion()
	require.True(t, s.call("s-text", false, "").GetOk())

	_, v2 := s.upgrade()
	require.Equal(t, v1, s.call("s-voice", false, "").GetMeta().GetSpecVersion(), "the voice mode pins")
	require.Equal(t, v2, s.admitted("s-text", false), "no layer pins a session without a mode")
}

// A pinned version the registry no longer holds is refused, naming the
// tool, the version and how to re-pin: never swapped for the current one.
func TestVanishedPinIsRefused(t *testing.T) {
	t.Parallel()
	s := startPinStack(t)
	r := s.call("s-gone", true, "")
	require.True(t, r.GetOk(), "%v", r.GetError())
	v1, v2 := s.upgrade()
	require.Equal(t, v1, r.GetMeta().GetSpecVersion())
	require.NoError(t, s.Env.Bus.Registry.Purge(t.Context(), registry.VersionKey("greet", v1)))

	pollSubmit(t, func() bool {
		r = s.call("s-gone", true, "")
		return !r.GetOk()
	}, "the dispatcher's registry forgets the version")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetMessage(), `spec version "`+v1+`" of tool "greet", which session "s-gone" pins, is no longer in the registry`)
	require.Contains(t, r.GetError().GetSuggestion(), "toolctl session repin s-gone greet")

	_, err := s.Dispatcher.ClearSessionPins(t.Context(), identity.Default, "s-gone", "")
	require.NoError(t, err)
	require.Equal(t, v2, s.admitted("s-gone", true))
}

// A pinned version that is disabled, or whose tool no pool serves any
// more, is refused NOT_FOUND naming the tool, the pinned version, the
// session and how to re-pin: never run as another version, never queued.
func TestUnservedPinIsRefused(t *testing.T) {
	t.Parallel()
	s := startPinStack(t)
	ctx := t.Context()

	// Disabled: the version stays in the registry, marked disabled.
	r := s.call("s-off", true, "")
	require.True(t, r.GetOk(), "%v", r.GetError())
	v1 := r.GetMeta().GetSpecVersion()
	e, err := s.Registry.Get("greet")
	require.NoError(t, err)
	off := proto.CloneOf(e.Spec)
	off.Disabled, off.DisabledReason = true, "its definition changed upstream"
	out, err := registry.Publish(ctx, s.Env.Bus.Registry, []*toolwirev1.ToolSpec{off})
	require.NoError(t, err)
	require.Equal(t, v1, out[0].Version, "disabling keeps the version")
	pollSubmit(t, func() bool {
		r = s.call("s-off", true, "")
		return !r.GetOk()
	}, "the dispatcher's registry sees the version disabled")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetMessage(), `spec version "`+v1+`" of tool "greet", which session "s-off" pins, is disabled: its definition changed upstream`)
	require.Contains(t, r.GetError().GetMessage(), "never swapped for another")
	require.Contains(t, r.GetError().GetSuggestion(), "toolctl session repin s-off greet")

	// No pool: the tool's only pool is gone (its worker stopped, its
	// consumer deleted). A replica that lists the pools every 50ms refuses
	// the pinned call once it sees that.
	late := tool.Must(tool.New("late", func(context.Context, struct{}) (string, error) { return "late", nil }))
	stopPool := startPool(t, s.Stack, "late-pool", late)
	s.WaitTool(t, "late")
	lateIn := func(d *dispatch.Dispatcher) *toolwirev1.CallResponse {
		r, err := d.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "late", ArgumentsJson: `{}`, Session: "s-pool", PinSessionVersions: true}, 30*time.Second)
		require.NoError(t, err)
		return r
	}
	first := lateIn(s.Dispatcher)
	require.True(t, first.Response.GetOk(), "%v", first.Response.GetError())
	pinned := first.Response.GetMeta().GetSpecVersion()
	d2 := s.StartDispatcher(t, dispatch.Config{Name: "d2", PoolCheck: 50 * time.Millisecond})
	stopPool() // a running worker puts its deleted consumer back
	require.NoError(t, s.Env.Bus.Calls.DeleteConsumer(ctx, s.Env.Bus.Config.PoolConsumer("late-pool")))
	var refused *toolwirev1.ToolResponse
	pollSubmit(t, func() bool {
		sub, err := d2.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "late", ArgumentsJson: `{}`, Session: "s-pool", PinSessionVersions: true})
		if err != nil {
			return false
		}
		refused = sub.Rejected
		return refused != nil
	}, "the replica sees the pool gone")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, refused.GetError().GetType(), "%v", refused.GetError())
	require.Contains(t, refused.GetError().GetMessage(), `spec version "`+pinned+`" of tool "late", which session "s-pool" pins, has no worker pool`)
	require.Contains(t, refused.GetError().GetSuggestion(), "toolctl session repin s-pool late")
}

// A session that pins a version its pool's workers do not run (here the
// current version, which no worker serves) has its call refused, never
// run as another version: the workers hand it back until its last
// delivery, and that answer names the version and the one the workers
// serve, and says plainly that no worker runs it: clearing the pin would
// pin the same version again, so it is not suggested. (Admission's pool
// check is per tool, not per version.)
func TestPinOfAVersionNoWorkerRunsIsNeverSwapped(t *testing.T) {
	t.Parallel()
	s := startPinStack(t)
	served, current := s.upgrade()
	r := s.call("s-ahead", true, "")
	require.False(t, r.GetOk(), "the session's version ran as another")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetMessage(), `unknown spec version "`+current+`" of tool "greet" (this worker serves "`+served+`")`)
	require.Contains(t, r.GetError().GetSuggestion(), `no worker of pool native runs version "`+current+`" of tool "greet" now, the registry's current version`)
	require.Contains(t, r.GetError().GetSuggestion(), "start a worker that serves it")
	require.NotContains(t, r.GetError().GetSuggestion(), "repin", "the next call would pin the same version")
	sess, err := s.Dispatcher.GetSession(t.Context(), identity.Default, "s-ahead")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"greet": current}, sess.GetPinnedVersions(), "the pin stands until the orchestrator clears it")
}

// After a rolling upgrade (the pool's workers now run the current
// version, and none the old one), a session that pinned the old version
// has its call refused on the last delivery, and the answer suggests
// clearing the session's pin, since its next call would pin the current
// version, which is served.
func TestPinOfAnOldVersionSuggestsTheRepin(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: builtin.Tools()})
	stopOld := startPool(t, s, "greet-pool", greet())
	s.WaitTool(t, "greet")
	ctx := t.Context()
	first, err := s.Dispatcher.Call(ctx, identity.Default, request(hostileSession, true, ""), 60*time.Second)
	require.NoError(t, err)
	require.True(t, first.Response.GetOk(), "%v", first.Response.GetError())
	old := first.Response.GetMeta().GetSpecVersion()

	stopOld()
	startPool(t, s, "greet-pool", tool.Must(tool.New("greet", func(_ context.Context, _ struct{}) (map[string]any, error) {
		return map[string]any{"said": "hello again"}, nil
	}, tool.WithDescription("Greets, version two."), tool.ReadOnly())))
	var current string
	pollSubmit(t, func() bool {
		e, err := s.Registry.Get("greet")
		require.NoError(t, err)
		current = e.Spec.Version
		return current != old
	}, "the new worker makes its version current")

	r, err := s.Dispatcher.Call(ctx, identity.Default, request(hostileSession, true, ""), 60*time.Second)
	require.NoError(t, err)
	require.False(t, r.Response.GetOk(), "the session's version ran as another")
	te := r.Response.GetError()
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.GetType(), "%v", te)
	require.Contains(t, te.GetMessage(), `unknown spec version "`+old+`" of tool "greet" (this worker serves "`+current+`")`)
	require.Contains(t, te.GetSuggestion(), `leave spec_version empty to run the current one ("`+current+`")`)
	require.Contains(t, te.GetSuggestion(), "`toolctl session repin "+quotedHostile+" greet`", "the session is one shell word")
}

// hostileSession is a session name a caller may choose that a shell would
// split and run: a repin command naming it quotes it (quotedHostile).
const (
	hostileSession = "s 1; $(touch /tmp/pwned)"
	quotedHostile  = "'s 1; $(touch /tmp/pwned)'"
)

// The repin suggestion of a call whose spec_version conflicts with its
// session's pin names the session as one shell word, whatever it holds.
func TestRepinHintQuotesTheSession(t *testing.T) {
	t.Parallel()
	s := startPinStack(t)
	r := s.call(hostileSession, true, "")
	require.True(t, r.GetOk(), "%v", r.GetError())
	r = s.call(hostileSession, true, "not-the-pin")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetSuggestion(), "`toolctl session repin "+quotedHostile+" greet`")
}

// A session that pins a version is listed that version (its description,
// schemas and definitions), as its calls run it; another session and a
// list without one see the current version.
func TestAPinnedSessionIsListedItsPinnedVersions(t *testing.T) {
	t.Parallel()
	s := startPinStack(t)
	ctx := t.Context()
	r := s.call("s-pinned", true, "")
	require.True(t, r.GetOk(), "%v", r.GetError())
	v1 := r.GetMeta().GetSpecVersion()
	_, v2 := s.upgrade()

	greetIn := func(session string) *toolwirev1.ToolSpec {
		tools, err := s.Dispatcher.VisibleToolsFor(ctx, identity.Default, registry.Filter{NameGlob: "greet"}, dispatch.ListFor{Session: session})
		require.NoError(t, err)
		require.Len(t, tools, 1)
		return tools[0]
	}
	pinned := greetIn("s-pinned")
	require.Equal(t, v1, pinned.GetVersion())
	require.Equal(t, "Greets, version one.", pinned.GetDescription())
	require.Equal(t, v2, greetIn("s-other").GetVersion())
	require.Equal(t, v2, greetIn("").GetVersion())
}
