package toolctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/toolctl"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// storeStatus is a line of `store status -o json`.
type storeStatus struct {
	Store                string   `json:"store"`
	Stream               string   `json:"stream"`
	Bytes                uint64   `json:"bytes"`
	Messages             uint64   `json:"messages"`
	MaxBytes             *int64   `json:"maxBytes"`
	FullAtBytes          *int64   `json:"fullAtBytes"`
	MaxMessages          *int64   `json:"maxMessages"`
	Used                 *float64 `json:"used"`
	MeasuredSeconds      *float64 `json:"measuredSeconds"`
	GrowthBytesPerSecond *float64 `json:"growthBytesPerSecond"`
	BytesPerCall         *float64 `json:"bytesPerCall"`
	SecondsToFull        *float64 `json:"secondsToFull"`
	ArchiveLagSeconds    *float64 `json:"archiveLagSeconds"`
}

// `store status` reads every store with the operator's credentials: a
// table by default, one JSON object per store with -o json, the growth
// measured while calls are written.
func TestStoreStatus(t *testing.T) {
	t.Parallel()
	env := bustest.StartWithRoles(t)
	opEnv := map[string]string{"TOOLWIRE_NATS_URL": env.Server.ClientURL(),
		"TOOLWIRE_NATS_CREDS": bus.CredentialsFile(env.Creds.Dir, bus.RoleOperator)}
	stores := env.Bus.Config.Stores()

	t.Run("Table", func(t *testing.T) {
		out := run(t, opEnv, "", "store", "status", "--sample", "0")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		lines := strings.Split(strings.TrimSpace(out.stdout), "\n")
		require.Equal(t, []string{"STORE", "BYTES", "MAX", "BYTES", "MSGS", "MAX", "MSGS", "USED", "B/CALL", "GROWTH/S",
			"FULL", "IN", "ARCHIVE", "LAG"}, strings.Fields(lines[0]))
		require.Len(t, lines, 1+len(stores), "a row per store:\n%s", out.stdout)
		for i, s := range stores {
			f := strings.Fields(lines[1+i])
			require.Len(t, f, 10, lines[1+i])
			require.Equal(t, s.Name, f[0])
			require.Equal(t, "-", f[6], "%s: no rate, no bytes per call", s.Name)
			require.Equal(t, "-", f[7], "%s: no growth measured", s.Name)
			require.Equal(t, "-", f[9], "%s: no archive", s.Name)
		}
		calls := strings.Fields(lines[1])
		require.Equal(t, []string{"calls", "0B", "4.0GiB", "0", "-", "0.0%"}, calls[:6])
	})

	t.Run("TableMeasured", func(t *testing.T) {
		out := run(t, opEnv, "", "store", "status", "--sample", "50ms")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		for _, l := range strings.Split(strings.TrimSpace(out.stdout), "\n") {
			if f := strings.Fields(l); f[0] == "registry" {
				require.Equal(t, "never", f[8], "measured, not growing: %s", l)
			}
		}
	})

	t.Run("JSONWhileWriting", func(t *testing.T) {
		// Calls are written through the whole sample.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var pubErr error
		wg.Go(func() {
			subject := env.Bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "default", "", "fill")
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, pubErr = env.Bus.JS.Publish(t.Context(), subject, bytes.Repeat([]byte("x"), 512)); pubErr != nil {
					return
				}
			}
		})
		out := run(t, opEnv, "", "store", "status", "--sample", "300ms", "-o", "json")
		close(stop)
		wg.Wait()
		require.NoError(t, pubErr)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		lines := strings.Split(strings.TrimSpace(out.stdout), "\n")
		require.Len(t, lines, len(stores))
		got := map[string]storeStatus{}
		for _, l := range lines {
			var s storeStatus
			require.NoError(t, json.Unmarshal([]byte(l), &s), l)
			got[s.Store] = s
		}
		calls := got["calls"]
		require.Equal(t, "TOOLWIRE_CALLS", calls.Stream)
		require.NotZero(t, calls.Bytes)
		require.NotNil(t, calls.MaxBytes)
		require.NotNil(t, calls.FullAtBytes)
		require.Equal(t, *calls.MaxBytes*9/10, *calls.FullAtBytes, "full at the dispatchers' high-water")
		require.Nil(t, calls.MaxMessages, "unbounded")
		require.NotNil(t, calls.Used)
		require.Greater(t, *calls.Used, 0.0)
		require.NotNil(t, calls.MeasuredSeconds)
		require.GreaterOrEqual(t, *calls.MeasuredSeconds, 0.3)
		require.Greater(t, *calls.GrowthBytesPerSecond, 0.0)
		require.NotNil(t, calls.BytesPerCall)
		require.Greater(t, *calls.BytesPerCall, 512.0, "a call's payload and its headers")
		require.NotNil(t, calls.SecondsToFull)
		require.Greater(t, *calls.SecondsToFull, 0.0)
		require.Nil(t, calls.ArchiveLagSeconds)
		idle := got["registry"]
		require.NotNil(t, idle.GrowthBytesPerSecond)
		require.Zero(t, *idle.GrowthBytesPerSecond)
		require.Nil(t, idle.SecondsToFull, "not growing: never full")
	})

	t.Run("BadSample", func(t *testing.T) {
		out := run(t, opEnv, "", "store", "status", "--sample", "-1s")
		require.Equal(t, toolctl.ExitUsage, out.code)
		require.Contains(t, out.stderr, "--sample")
	})
}

// A prefix with no installation is said, with the flag that fixes it.
func TestStoreStatusWrongPrefix(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	out := run(t, map[string]string{"TOOLWIRE_NATS_URL": env.URL}, "", "store", "status", "--sample", "0", "--prefix", "other")
	require.Equal(t, toolctl.ExitUsage, out.code)
	require.Contains(t, out.stderr, "no toolwire installation")
	require.Contains(t, out.stderr, "OTHER_CALLS")
	require.Contains(t, out.stderr, "--prefix")
}

// With an archive, `store status` shows each archived stream's lag with
// the operator's credentials, as the dispatchers read it: the age of the
// stream's oldest message not yet archived (0 when caught up); the other
// stores show none (issue 29's "archive lag" column was always "-").
func TestStoreStatusShowsTheArchiveLag(t *testing.T) {
	t.Parallel()
	env := bustest.StartWithRoles(t)
	ctx := t.Context()
	opEnv := map[string]string{"TOOLWIRE_NATS_URL": env.Server.ClientURL(),
		"TOOLWIRE_NATS_CREDS": bus.CredentialsFile(env.Creds.Dir, bus.RoleOperator)}
	status := func() map[string]storeStatus {
		t.Helper()
		out := run(t, opEnv, "", "store", "status", "--sample", "0", "-o", "json")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		got := map[string]storeStatus{}
		for _, l := range strings.Split(strings.TrimSpace(out.stdout), "\n") {
			var s storeStatus
			require.NoError(t, json.Unmarshal([]byte(l), &s), l)
			got[s.Store] = s
		}
		return got
	}
	subject := env.Bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "default", "builtin", "echo")
	publish := func() {
		t.Helper()
		_, err := env.Bus.JS.Publish(ctx, subject, []byte("a call"))
		require.NoError(t, err)
	}
	publish()
	require.Nil(t, status()["calls"].ArchiveLagSeconds, "no archive yet")

	store, err := archive.OpenBucket(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	a := archive.New(archive.Config{Bus: env.Bus, Store: store, Name: "d1", Segment: time.Second, Settle: 100 * time.Millisecond,
		Every: 100 * time.Millisecond, HoldAhead: time.Hour})
	require.NoError(t, a.Start(context.Background()))
	kv, err := env.Bus.JS.KeyValue(ctx, archive.Bucket(env.Bus.Config.Prefix))
	require.NoError(t, err)
	deadline := time.Now().Add(60 * time.Second)
	for {
		p, err := archive.ReadProgress(ctx, kv, env.Bus.Config.CallsStream())
		require.NoError(t, err)
		if p[env.Bus.Config.CallsStream()].ToSeq >= 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the call was not archived")
		time.Sleep(50 * time.Millisecond) // polling with a deadline, not synchronisation
	}
	require.NoError(t, a.Stop(context.Background()))
	got := status()
	for _, name := range []string{"calls", "results", "events"} {
		require.NotNil(t, got[name].ArchiveLagSeconds, "%s: archived", name)
		require.Zero(t, *got[name].ArchiveLagSeconds, "%s: caught up", name)
	}
	require.Nil(t, got["registry"].ArchiveLagSeconds, "not archived")

	// A call the stopped archiver never archives: its age is the lag.
	before := time.Now()
	publish()
	got = status()
	require.NotNil(t, got["calls"].ArchiveLagSeconds)
	require.Positive(t, *got["calls"].ArchiveLagSeconds)
	require.LessOrEqual(t, *got["calls"].ArchiveLagSeconds, time.Since(before).Seconds())
	out := run(t, opEnv, "", "store", "status", "--sample", "0")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	for _, l := range strings.Split(strings.TrimSpace(out.stdout), "\n")[1:] {
		f := strings.Fields(l)
		switch f[0] {
		case "calls", "results", "events":
			require.NotEqual(t, "-", f[len(f)-1], l)
		default:
			require.Equal(t, "-", f[len(f)-1], l)
		}
	}

	// A lag that cannot be read (here a progress record that does not
	// decode) is "-" with a warning: the stores' status is still shown.
	_, err = kv.Put(ctx, archive.ProgressKey(env.Bus.Config.ResultsStream()), []byte("not json"))
	require.NoError(t, err)
	got = status()
	for _, name := range []string{"calls", "results", "events"} {
		require.Nil(t, got[name].ArchiveLagSeconds, "%s: not read", name)
	}
	require.Contains(t, run(t, opEnv, "", "store", "status", "--sample", "0").stderr, "the archive's lag was not read")
}
