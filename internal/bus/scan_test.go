package bus_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// scanEnv is an installation with three calls stored and an operator's
// view of CALLS.
type scanEnv struct {
	*authEnv
	ocalls jetstream.Stream
}

func startScan(t *testing.T) scanEnv {
	t.Helper()
	e := startAuth(t, bus.Config{})
	ctx := t.Context()
	for i := range 3 {
		_, err := e.bus.JS.Publish(ctx, e.bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "acme", "builtin", "echo"),
			[]byte{byte(i)})
		require.NoError(t, err)
	}
	nc, _ := e.dialRole(t, bus.RoleOperator)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ocalls, err := js.Stream(ctx, e.bus.Config.CallsStream())
	require.NoError(t, err)
	return scanEnv{authEnv: e, ocalls: ocalls}
}

// open starts a scan of CALLS as the operator and makes its first
// consumer; it returns the scan and its consumer's name.
func (e scanEnv) open(t *testing.T, inactive time.Duration) (*bus.Scan, string) {
	t.Helper()
	scan, err := bus.NewScan(t.Context(), e.ocalls, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{e.bus.Subjects.AllCalls()}, InactiveThreshold: inactive})
	require.NoError(t, err)
	t.Cleanup(func() { _ = scan.Close() })
	_, err = scan.FetchNoWait(1)
	require.NoError(t, err)
	info, err := scan.Info(t.Context())
	require.NoError(t, err)
	return scan, info.Name
}

// exists reports whether CALLS has consumer name.
func (e scanEnv) exists(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.bus.Calls.Consumer(t.Context(), name)
	if err != nil {
		require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
		return false
	}
	return true
}

// A scan whose consumer went (expired while its caller paused, or
// deleted by hand) while another scan took the slot leaves the other's
// consumer alone, when it fetches again and when it closes.
func TestScanNeverDeletesAnotherScansConsumer(t *testing.T) {
	t.Parallel()
	// How long the paused scan's consumer outlives its last fetch.
	inactive := map[string]time.Duration{"expired": time.Second, "deleted by hand": time.Minute}
	gone := map[string]func(t *testing.T, e scanEnv, name string){
		"expired": func(t *testing.T, e scanEnv, name string) {
			until(t, 30*time.Second, "the paused scan's consumer expires", func() bool { return !e.exists(t, name) })
		},
		"deleted by hand": func(t *testing.T, e scanEnv, name string) {
			require.NoError(t, e.bus.Calls.DeleteConsumer(t.Context(), name))
		},
	}
	ends := map[string]func(t *testing.T, paused, other *bus.Scan){
		"close": func(t *testing.T, paused, _ *bus.Scan) { require.NoError(t, paused.Close()) },
		"fetch": func(t *testing.T, paused, other *bus.Scan) {
			require.NoError(t, other.Close()) // a slot to go on in
			_, err := paused.FetchNoWait(1)
			require.NoError(t, err)
		},
	}
	for how, goes := range gone {
		for verb, end := range ends {
			t.Run(how+", then "+verb, func(t *testing.T) {
				t.Parallel()
				e := startScan(t)
				var other *bus.Scan
				for range bus.ScanSlots - 1 {
					other, _ = e.open(t, 0) // the other slots, taken
				}
				a, name := e.open(t, inactive[how])
				goes(t, e, name)
				b, bname := e.open(t, 0)
				require.Equal(t, name, bname, "the only free slot")
				before, err := e.bus.Calls.Consumer(t.Context(), name)
				require.NoError(t, err)

				end(t, a, other)
				after, err := e.bus.Calls.Consumer(t.Context(), name)
				require.NoError(t, err, "the other scan's consumer is still there")
				require.Equal(t, before.CachedInfo().Created, after.CachedInfo().Created, "the very same one")
				_, err = b.Info(t.Context())
				require.NoError(t, err)
				_, err = b.FetchNoWait(1)
				require.NoError(t, err)
			})
		}
	}
}

// A scan with a NamePrefix (a dispatcher's: its role may name consumers
// freely) never takes an operator's slot.
func TestScanWithNamePrefixLeavesTheSlots(t *testing.T) {
	t.Parallel()
	e := startScan(t)
	ctx := t.Context()
	scan, err := bus.NewScan(ctx, e.bus.Calls, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{e.bus.Subjects.AllCalls()}, NamePrefix: "toolwire_index_"})
	require.NoError(t, err)
	var got []byte
	for len(got) < 3 {
		batch, err := scan.Fetch(2, jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		for m := range batch.Messages() {
			got = append(got, m.Data()...)
		}
		info, err := scan.Info(ctx)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(info.Name, "toolwire_index_"), info.Name)
	}
	require.Equal(t, []byte{0, 1, 2}, got, "in order, none twice")
	require.NoError(t, scan.Close())
	lister := e.bus.Calls.ListConsumers(ctx)
	n := 0
	for range lister.Info() {
		n++
	}
	require.NoError(t, lister.Err())
	require.Zero(t, n, "no consumer left")
	for range bus.ScanSlots {
		_, _ = e.open(t, 0) // every slot still free for operators
	}
}

// until polls cond every 20ms until it holds, failing after d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, d)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}
