package dispatch_test

import (
	"context"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// CallArguments reads back a stored call's arguments as admitted, from
// the calls stream or, for a call parked for approval, from its approval;
// never another tenant's call, nor a call of another tool.
func TestCallArgumentsReadsTheStoredCall(t *testing.T) {
	t.Parallel()
	login := tool.Must(tool.New("login", func(_ context.Context, in struct {
		Password string `json:"password" toolwire:"secret"`
	}) (string, error) {
		return "ok", nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), login)})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation,
		[]byte("tenant:\n  default: allow\n  rules:\n    - {id: ask-echo, effect: ask, tools: [echo]}\n"), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	d, ctx, id := s.Dispatcher, t.Context(), identity.Default

	// Calls of the tool before and after, so the scan passes others by.
	for range 3 {
		callNow(t, d, id, &toolwirev1.CallRequest{Tool: "login", ArgumentsJson: `{"password":"other"}`})
	}
	const args = `{"password":"s3cret-value"}`
	r, err := d.Call(ctx, id, &toolwirev1.CallRequest{Tool: "login", ArgumentsJson: args}, 0)
	require.NoError(t, err)
	callNow(t, d, id, &toolwirev1.CallRequest{Tool: "login", ArgumentsJson: `{"password":"later"}`})
	got, err := d.CallArguments(ctx, id, "login", r.CallId)
	require.NoError(t, err)
	require.JSONEq(t, args, string(got))

	_, err = d.CallArguments(ctx, identity.Identity{Tenant: "other"}, "login", r.CallId)
	require.ErrorIs(t, err, dispatch.ErrCallNotStored, "another tenant's call")
	_, err = d.CallArguments(ctx, id, "echo", r.CallId)
	require.ErrorIs(t, err, dispatch.ErrCallNotStored, "another tool's")
	_, err = d.CallArguments(ctx, id, "login", "not-an-id")
	require.ErrorIs(t, err, dispatch.ErrCallNotStored)

	// Parked for approval: not on the calls stream yet.
	sub, err := d.Submit(ctx, id, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"parked"}`})
	require.NoError(t, err)
	require.NotNil(t, sub.Awaiting)
	got, err = d.CallArguments(ctx, id, "echo", sub.CallID)
	require.NoError(t, err)
	require.JSONEq(t, `{"text":"parked"}`, string(got))
}

// Reading a stored call leaves no consumer behind on the calls stream,
// found or not; a call id older than the calls around it is not found
// (the scan stops past its time); a cancelled read ends with ctx's error.
func TestCallArgumentsCleansUp(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	d, ctx, id := s.Dispatcher, t.Context(), identity.Default
	consumers := func() []string {
		var names []string
		for name := range s.Env.Bus.Calls.ConsumerNames(ctx).Name() {
			names = append(names, name)
		}
		slices.Sort(names)
		return names
	}
	r, err := d.Call(ctx, id, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"a"}`}, 30*time.Second)
	require.NoError(t, err)
	before := consumers()

	got, err := d.CallArguments(ctx, id, "echo", r.CallId)
	require.NoError(t, err)
	require.JSONEq(t, `{"text":"a"}`, string(got))
	old := ulid.MustNew(ulid.Timestamp(time.Now().Add(-time.Hour)), rand.Reader).String()
	_, err = d.CallArguments(ctx, id, "echo", old)
	require.ErrorIs(t, err, dispatch.ErrCallNotStored)
	_, err = d.CallArguments(ctx, id, "echo", ulid.Make().String())
	require.ErrorIs(t, err, dispatch.ErrCallNotStored)
	require.Eventually(t, func() bool { return slices.Equal(before, consumers()) }, 20*time.Second, 50*time.Millisecond,
		"consumers left on the calls stream")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = d.CallArguments(cancelled, id, "echo", r.CallId)
	require.ErrorIs(t, err, context.Canceled)
}
