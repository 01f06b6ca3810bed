package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Each baseline answers every call with its own result: every caller gets
// the result its call id names (call checks the id the result carries),
// no result arrives twice or unasked, every call and every result is
// stored once, and every call is acked without a redelivery.
func TestBaselineAnswersEachCallerWithItsOwnResult(t *testing.T) {
	t.Parallel()
	for _, path := range []string{PathBaseline, PathBaselineFetch} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.Path = path
			cfg = cfg.WithDefaults()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			p, err := capturePayloads(ctx, cfg)
			require.NoError(t, err)
			e, err := startEnv(ctx, cfg)
			require.NoError(t, err)
			defer func() { require.NoError(t, e.close()) }()
			b, err := startBaseline(ctx, e, p)
			require.NoError(t, err)
			defer func() { require.NoError(t, b.stop()) }()

			const n, inflight = 300, 16
			lat, _, err := drive(ctx, inflight, n, b.call)
			require.NoError(t, err, "every call answered with its own result")
			require.Len(t, lat, n)
			require.EqualValues(t, n, b.answered.Load())

			calls, err := b.callerJS.Stream(ctx, baseCallsStream)
			require.NoError(t, err)
			results, err := b.callerJS.Stream(ctx, baseResultsStream)
			require.NoError(t, err)
			// The caller may see a result before it is stored and before
			// its call is acked: wait for both.
			require.Eventually(t, func() bool {
				ci, err := b.cons.Info(ctx)
				if err != nil || ci.NumAckPending != 0 || ci.NumPending != 0 {
					return false
				}
				ri, err := results.Info(ctx)
				return err == nil && ri.State.Msgs >= n
			}, time.Minute, 10*time.Millisecond, "every result stored and every call acked")
			ri, err := results.Info(ctx)
			require.NoError(t, err)
			require.EqualValues(t, n, ri.State.Msgs, "one result stored per call")
			ci, err := b.cons.Info(ctx)
			require.NoError(t, err)
			require.Zero(t, ci.NumRedelivered)
			require.EqualValues(t, n, ci.AckFloor.Consumer, "each call delivered once")
			si, err := calls.Info(ctx)
			require.NoError(t, err)
			require.EqualValues(t, n, si.State.Msgs)
			require.Zero(t, b.stray.Load(), "no result arrived twice or unasked")
		})
	}
}
