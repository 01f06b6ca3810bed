package dispatch_test

import (
	"context"
	"crypto/rand"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// archivedStack is a stack whose streams keep a window of a few seconds
// and whose dispatcher archives them (segments of a second) to store.
func archivedStack(t *testing.T, window time.Duration, cfg dispatch.Config) (*dispatchtest.Stack, *archive.Reader) {
	t.Helper()
	store, err := archive.OpenBucket(t.Context(), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	cfg.Archive = store
	cfg.ArchiveSegment, cfg.ArchiveSettle = time.Second, 100*time.Millisecond
	cfg.ArchiveEvery = 100 * time.Millisecond
	cfg.PublishHorizon = 400 * time.Millisecond
	s := dispatchtest.Start(t, dispatchtest.Options{
		Bus: bus.Config{CallsMaxAge: window, ResultsMaxAge: window, EventsMaxAge: window,
			DuplicateWindow: time.Second, IdempotencyTTL: time.Second},
		Dispatcher: cfg})
	return s, archive.NewReader(store)
}

// A call's result that the results stream no longer holds (older than
// its window) is answered from the archive by GetResult, Watch's first
// look and Cancel, checked as a live one: a forged result in the archive
// (a real result's signed bytes stored for another call, an unsigned
// one) is not believed.
func TestResultOlderThanTheWindowIsReadFromTheArchive(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, reg := withMetrics(t, dispatch.Config{})
	s, ar := archivedStack(t, 2*time.Second, cfg)
	var reads atomic.Int64
	ar.OnRead = func(*archive.Manifest) { reads.Add(1) }
	b := s.Env.Bus

	res, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"kept"}`}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, res.GetResponse().GetOk(), "%v", res.GetResponse().GetError())
	callID := res.GetCallId()
	live, err := b.Results.GetLastMsgForSubject(ctx, b.Subjects.ResultAnyDispatcher(identity.Default.Tenant, callID))
	require.NoError(t, err)

	// Forgeries on the subject of a call not answered yet (it sleeps):
	// the real result's signed bytes and headers (another call's), and
	// an unsigned result naming it.
	sleeping, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1h"}`})
	require.NoError(t, err)
	require.Nil(t, sleeping.Rejected)
	forged := sleeping.CallID
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, forged, "test over") })
	forgedSubject := b.Subjects.Result(identity.Default.Tenant, s.Dispatcher.Name(), forged)
	_, err = b.JS.PublishMsg(ctx, &nats.Msg{Subject: forgedSubject, Header: live.Header, Data: live.Data})
	require.NoError(t, err)
	unsigned, err := proto.Marshal(&toolwirev1.ToolResponse{CallId: forged, Tool: "sleep", Ok: true})
	require.NoError(t, err)
	_, err = b.JS.Publish(ctx, forgedSubject, unsigned)
	require.NoError(t, err)

	results := b.Config.ResultsStream()
	requireEventually(t, func() bool {
		info, err := b.Results.Info(ctx)
		return err == nil && info.State.Msgs == 0 && info.State.FirstSeq > live.Sequence
	}, "the results stream to drop the results (once archived)")
	archived := map[string]int{}
	require.NoError(t, ar.Each(ctx, results, archive.Query{}, func(m *archive.Message) bool {
		archived[m.Subject]++
		return true
	}))
	require.Equal(t, 1, archived[live.Subject])
	require.Equal(t, 2, archived[forgedSubject], "the forgeries are in the archive")

	got, err := s.Dispatcher.GetResult(ctx, identity.Default, callID, 0)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, got.GetState(), "a result past the window is answered from the archive")
	require.True(t, got.GetResponse().GetOk())
	require.Equal(t, callID, got.GetResponse().GetCallId())
	require.Contains(t, got.GetResponse().GetContent()[0].GetText().GetText(), "kept")

	outcome, err := s.Dispatcher.Cancel(ctx, identity.Default, callID, "too late")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, outcome)

	refused := metricSum(t, reg, "toolwire_dispatcher_results_refused_total", nil)
	got, err = s.Dispatcher.GetResult(ctx, identity.Default, forged, 0)
	require.NoError(t, err)
	require.NotEqual(t, toolwirev1.CallState_CALL_STATE_DONE, got.GetState(), "a forged archived result is not believed")
	require.Nil(t, got.GetResponse())
	require.Equal(t, refused+2, metricSum(t, reg, "toolwire_dispatcher_results_refused_total", nil), "each archived forgery is refused and counted")

	// What a read costs: the segments of the call's life, and none for a
	// call no stored call stands behind or one dated before the archive.
	answers := believed.Reader{JS: b.JS, Stream: b.Results, Keys: b.Keys}
	n := reads.Load()
	stored, err := answers.ReadArchived(ctx, ar, believed.ArchivedQuery{Filter: live.Subject, Tool: "echo", End: time.Now()})
	require.NoError(t, err)
	require.NotNil(t, stored, "the archived result is believed")
	require.Greater(t, reads.Load(), n)
	n = reads.Load()
	old := ulid.MustNew(0, rand.Reader).String()
	got1970, err := answers.ReadArchived(ctx, ar, believed.ArchivedQuery{Filter: b.Subjects.ResultAnyDispatcher(identity.Default.Tenant, old), Tool: "echo"})
	require.NoError(t, err)
	require.Nil(t, got1970)
	require.Equal(t, n, reads.Load(), "an id dated 1970 reads no segment")
	madeUp, err := answers.ReadArchived(ctx, ar, believed.ArchivedQuery{Filter: b.Subjects.ResultAnyDispatcher(identity.Default.Tenant, ulid.Make().String())})
	require.NoError(t, err)
	require.Nil(t, madeUp)
	require.Equal(t, n, reads.Load(), "a made-up id (no stored call, no tool) reads no segment")
}

// metricSum is the sum of the values of the metric family name in reg
// whose labels include want.
func metricSum(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
					continue next
				}
			}
			n += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return n
}

// withMetrics is cfg with dispatcher metrics on a registry of its own.
func withMetrics(t *testing.T, cfg dispatch.Config) (dispatch.Config, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := telemetry.NewDispatcherMetrics(reg)
	require.NoError(t, err)
	cfg.Metrics = m
	return cfg, reg
}
