package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/maintenance"
)

// Finding 7 of issue 27: a credential that may create consumers on CALLS
// (the worker credential did; now only the dispatchers' and a hand with
// every permission may: bus.RolePermissions) may create a push consumer
// that delivers stored calls onto a subject of its choosing (the create
// body is not visible to NATS permissions). The dispatchers delete every
// push consumer of CALLS and DLQ within PushEvery; pull consumers (pools,
// scans) stay.
func TestPushConsumersAreDeleted(t *testing.T) {
	t.Parallel()
	env := bustest.StartWithRoles(t)
	nc := env.Bus.NC
	calls := env.Bus.Config.CallsStream()
	create := func(name string, cfg map[string]any) {
		cfg["name"], cfg["ack_policy"], cfg["filter_subject"] = name, "explicit", env.Bus.Subjects.AllCalls()
		b, err := json.Marshal(map[string]any{"stream_name": calls, "config": cfg})
		require.NoError(t, err)
		m, err := nc.Request("$JS.API.CONSUMER.CREATE."+calls+"."+name, b, 5*time.Second)
		require.NoError(t, err)
		require.NotContains(t, string(m.Data), `"error"`, "created: %s", m.Data)
	}
	create("evil", map[string]any{"deliver_subject": "toolwire.admin.dlq.retry"})
	create("toolwire_pool_native", map[string]any{})

	p := maintenance.NewPushConsumers(maintenance.Config{Bus: env.Bus, Name: "d1", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, p.Start(t.Context()))
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	require.Eventually(t, func() bool {
		_, err := env.Bus.Calls.Consumer(t.Context(), "evil")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	}, 3*maintenance.PushEvery, 50*time.Millisecond, "the push consumer is deleted")
	_, err := env.Bus.Calls.Consumer(t.Context(), "toolwire_pool_native")
	require.NoError(t, err, "a pull consumer stays")
}
