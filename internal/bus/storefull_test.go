package bus_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
)

// A write refused for want of space is StoreFull whichever limit ran
// out: the stream's own (its maximum bytes), the account's JetStream
// storage, or the server's (max_file_store). Each has its own error code.
func TestStoreFullWhicheverLimitRunsOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		maxStore int64               // the server's max_file_store
		account  int64               // the account's storage limit; 0 = none
		stream   int64               // the stream's MaxBytes; 0 = none
		code     jetstream.ErrorCode // what the server answers
	}{
		{name: "stream", maxStore: 1 << 30, stream: 64 << 10, code: 10077},
		{name: "account", maxStore: 1 << 30, account: 64 << 10, code: 10002},
		{name: "server", maxStore: 64 << 10, code: 10023},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv, err := bus.StartEmbedded(ctx, bus.EmbeddedConfig{StoreDir: t.TempDir(), MaxStore: tc.maxStore})
			require.NoError(t, err)
			t.Cleanup(srv.Shutdown)
			if tc.account > 0 {
				require.NoError(t, srv.Server.GlobalAccount().UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{
					"": {MaxMemory: -1, MaxStore: tc.account, MaxStreams: -1, MaxConsumers: -1}}))
			}
			nc, err := srv.Connect("test")
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			cfg := jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill"}, Storage: jetstream.FileStorage}
			if tc.stream > 0 {
				cfg.MaxBytes, cfg.Discard = tc.stream, jetstream.DiscardNew
			}
			_, err = js.CreateStream(ctx, cfg)
			require.NoError(t, err)
			data := []byte(strings.Repeat("x", 1024))
			for i := 0; ; i++ {
				require.Less(t, i, 10_000, "the server never refused a write")
				_, err = js.Publish(ctx, "fill", data)
				if err != nil {
					break
				}
			}
			var apiErr *jetstream.APIError
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, tc.code, apiErr.ErrorCode, "%v", err)
			require.True(t, bus.StoreFull(err), "%v", err)
		})
	}
	require.False(t, bus.StoreFull(jetstream.ErrKeyExists))
	require.False(t, bus.StoreFull(&jetstream.APIError{ErrorCode: 10077, Description: "some io error"}))
}
