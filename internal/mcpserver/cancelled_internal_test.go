package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// An operator credential cannot have the server deliver what it stored
// (a call on a shadow subject, which its role may publish) onto the
// replicas' cancellations subject through a push consumer on CALLS under a
// scan slot's name, to cancel another tenant's request: the delivery
// carries a $JS.ACK reply, and a replica takes only notices published
// without one. Nor is a notice taken that a dispatcher's key did not sign.
func TestOperatorCannotForgeCancelsThroughAPushConsumer(t *testing.T) {
	t.Parallel()
	env := bustest.StartWithRoles(t)
	require.NoError(t, registry.EnrolDispatcher(t.Context(), env.Bus.Registry, env.Bus.Signer.Public(), "d"))
	s := &Server{cfg: Config{Bus: env.Bus}, log: slog.New(slog.DiscardHandler)}
	stop, err := s.listenCancels()
	require.NoError(t, err)
	t.Cleanup(stop)
	victim := identity.Identity{Tenant: "victim", Agent: "a"}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	remove, ok := s.inflight.add(inflightKey(victim, json.RawMessage("7")), cancel)
	require.True(t, ok)
	defer remove()
	subject := cancelSubject(env.Bus.Subjects.Prefix)
	// A subscription on the listener's connection: what it has, the
	// listener has had before.
	probe, err := env.Bus.NC.SubscribeSync(subject)
	require.NoError(t, err)
	require.NoError(t, env.Bus.NC.Flush())

	onc, err := bus.Dial(bus.ConnConfig{URL: env.Server.ClientURL(), Name: "operator", CredsFile: bus.CredentialsFile(env.Creds.Dir, bus.RoleOperator),
		InboxPrefix: bus.InboxPrefix(env.Bus.Config, bus.RoleOperator)}, nats.MaxReconnects(0))
	require.NoError(t, err)
	t.Cleanup(onc.Close)
	js, err := jetstream.New(onc)
	require.NoError(t, err)
	forged, err := json.Marshal(cancelNotice{Tenant: victim.Tenant, Agent: victim.Agent, RequestID: json.RawMessage("7"), Reason: "forged"})
	require.NoError(t, err)
	shadow := env.Bus.Subjects.Shadow(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "x", "p", "forged")
	_, err = js.Publish(t.Context(), shadow, forged)
	require.NoError(t, err)
	calls := env.Bus.Config.CallsStream()
	body, err := json.Marshal(map[string]any{"stream_name": calls, "config": map[string]any{
		"name": bus.ScanConsumer(0), "deliver_subject": subject, "filter_subject": shadow,
		"deliver_policy": "all", "ack_policy": "none"}})
	require.NoError(t, err)
	resp, err := onc.Request("$JS.API.CONSUMER.CREATE."+calls+"."+bus.ScanConsumer(0)+"."+shadow, body, 10*time.Second)
	require.NoError(t, err)
	require.NotContains(t, string(resp.Data), `"error"`, "the operator makes the push consumer")

	m, err := probe.NextMsg(20 * time.Second)
	require.NoError(t, err)
	require.JSONEq(t, string(forged), string(m.Data))
	require.NotEmpty(t, m.Reply, "a delivery carries a reply")

	// Unsigned, or signed by a key that is no dispatcher's: refused.
	unsigned, err := json.Marshal(cancelNotice{Tenant: victim.Tenant, Agent: victim.Agent, RequestID: json.RawMessage("7"), Reason: "unsigned"})
	require.NoError(t, err)
	require.NoError(t, env.Bus.NC.Publish(subject, unsigned))
	other, err := signing.NewKey()
	require.NoError(t, err)
	require.NoError(t, env.Bus.NC.PublishMsg(other.SignedMsg(subject, signing.KindMCPCancel, "", 0, unsigned, nil)))

	// A replica's notice, published after the others, is taken: the
	// request ends with its reason.
	genuine, err := json.Marshal(cancelNotice{Tenant: victim.Tenant, Agent: victim.Agent, RequestID: json.RawMessage("7"), Reason: "genuine"})
	require.NoError(t, err)
	require.NoError(t, env.Bus.NC.PublishMsg(env.Bus.Signer.SignedMsg(subject, signing.KindMCPCancel, "", 0, genuine, nil)))
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the replica's notice did not cancel the request")
	}
	var cc *ClientCancelled
	require.True(t, errors.As(context.Cause(ctx), &cc))
	require.Equal(t, "genuine", cc.Reason)
}

// A reason over maxReason bytes is cut at a character's boundary: what is
// passed on, and what the call is cancelled with, is valid UTF-8 (a
// CANCEL_REQUESTED event's string field refuses anything else).
func TestLongReasonIsCutAtACharacter(t *testing.T) {
	t.Parallel()
	s := &Server{log: slog.New(slog.DiscardHandler)}
	id := identity.Identity{Tenant: "acme", Agent: "a"}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	remove, ok := s.inflight.add(inflightKey(id, json.RawMessage("1")), cancel)
	require.True(t, ok)
	defer remove()
	s.clientCancelled(id, json.RawMessage("1"), strings.Repeat("a", 511)+"é")
	var cc *ClientCancelled
	require.True(t, errors.As(context.Cause(ctx), &cc))
	require.True(t, utf8.ValidString(cc.Reason), "reason %q", cc.Reason)
	require.Equal(t, strings.Repeat("a", 511), cc.Reason)
	require.True(t, utf8.ValidString(cutReason("ok\xff")))
}

// A request a notification cancelled is forgotten at once: the client's
// next request under the same id, sent while the first one's handler is
// still cancelling its call, is the only one a notification then names.
func TestCancelledRequestIsForgottenAtOnce(t *testing.T) {
	t.Parallel()
	var f inflight
	key := inflightKey(identity.Default, json.RawMessage(`2`))
	first, cancelFirst := context.WithCancelCause(t.Context())
	removeFirst, ok := f.add(key, cancelFirst)
	require.True(t, ok)
	require.Equal(t, 1, f.cancel(key, errors.New("first")))
	require.EqualError(t, context.Cause(first), "first")

	second, cancelSecond := context.WithCancelCause(t.Context())
	removeSecond, ok := f.add(key, cancelSecond)
	require.True(t, ok)
	require.Equal(t, 1, f.cancel(key, errors.New("second")))
	require.EqualError(t, context.Cause(second), "second")
	removeFirst() // the first handler returns only now
	removeSecond()
	require.Zero(t, f.n)
	require.Empty(t, f.reqs)
}
