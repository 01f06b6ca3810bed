package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A pool taking over the tool of a pool whose consumer is gone starts:
// its claim is refused while the holder has been missing for less than
// registry.ClaimGrace, and the worker claims once more when that period
// has passed, instead of failing its start (a dispatcher's in-process
// pool failed the whole dispatcher). The holder's absence is recorded
// here as a claim records it (the record as old as the absence); the
// test runs for a grace period, about 32s.
func TestStartClaimsAgainAfterTheGracePeriod(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	taken := tool.Must(tool.New("taken_over", func(_ context.Context, _ struct{}) (string, error) { return "new", nil }))
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	holder := registry.Source{Pool: "retired", Subject: s.Env.Bus.Subjects.ToolSubject(native, "builtin", "taken_over"),
		Worker: "gone", MissingSince: time.Now().UTC()}
	b, err := json.Marshal(holder)
	require.NoError(t, err)
	_, err = s.Env.Bus.Registry.Put(t.Context(), registry.SourceKey("taken_over"), b)
	require.NoError(t, err)

	start := time.Now()
	startCustomWorker(t, s, worker.Config{}, bus.PoolConfig{Name: "newpool"}, taken)
	require.GreaterOrEqual(t, time.Since(start), registry.ClaimGrace, "claimed again only after the grace period")
	e, err := s.Env.Bus.Registry.Get(t.Context(), registry.SourceKey("taken_over"))
	require.NoError(t, err)
	require.Contains(t, string(e.Value()), `"pool":"newpool"`)
}
