package dashboard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
)

// Zero fields take their defaults; a missing part or an invalid field is
// refused, named, by Validate and by New.
func TestConfigDefaultsAndValidate(t *testing.T) {
	t.Parallel()
	st := dispatchtest.Start(t, dispatchtest.Options{})
	base := Config{Core: st.Dispatcher, Approvals: st.Dispatcher.Approvals(), Auth: identity.OpenAccess{Identity: identity.Default}, Registry: st.Registry,
		Streams: streamsOf(t, st.Env.Bus)}
	c := base.WithDefaults()
	require.Equal(t, callindex.DefaultMax, c.IndexCalls)
	require.Equal(t, 12*time.Hour, c.SessionTTL)
	require.NotNil(t, c.Logger)
	require.NoError(t, c.Validate())

	for _, tc := range []struct {
		name   string
		change func(*Config)
		err    string // "" = valid
	}{
		{"a secret and a trace URL", func(c *Config) {
			c.Secret, c.TraceURL = make([]byte, 32), "https://traces.example/trace/{trace_id}"
		}, ""},
		{"no Core", func(c *Config) { c.Core = nil }, "Core"},
		{"no Auth", func(c *Config) { c.Auth = nil }, "Auth"},
		{"no Registry", func(c *Config) { c.Registry = nil }, "Registry"},
		{"no DLQ", func(c *Config) { c.Streams.DLQ = nil }, "Streams"},
		{"no results stream", func(c *Config) { c.Streams.Results = nil }, "Streams"},
		{"no sign-out bucket", func(c *Config) { c.Streams.Revocations = nil }, "Revocations"},
		{"no connection", func(c *Config) { c.Streams.Conn = nil }, "Conn"},
		{"a short secret", func(c *Config) { c.Secret = make([]byte, 16) }, "Secret"},
		{"negative IndexCalls", func(c *Config) { c.IndexCalls = -1 }, "IndexCalls"},
		{"negative SessionTTL", func(c *Config) { c.SessionTTL = -time.Hour }, "SessionTTL"},
		{"SessionTTL over the sign-outs' life", func(c *Config) { c.SessionTTL = MaxSessionTTL + time.Second }, "SessionTTL"},
		{"a TraceURL without {trace_id}", func(c *Config) { c.TraceURL = "https://traces.example/" }, "TraceURL"},
	} {
		cfg := base
		tc.change(&cfg)
		err := cfg.WithDefaults().Validate()
		if tc.err == "" {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorContains(t, err, tc.err, tc.name)
		_, err = New(cfg)
		require.ErrorContains(t, err, tc.err, tc.name)
	}
}
