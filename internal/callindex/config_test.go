package callindex

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
)

// Zero fields take their defaults; an invalid field is refused, named.
func TestConfigDefaultsAndValidate(t *testing.T) {
	t.Parallel()
	c := Config{}.WithDefaults()
	require.Equal(t, DefaultMax, c.Max)
	require.NotNil(t, c.Logger)
	require.NoError(t, c.Validate())

	env := bustest.Start(t, bus.Config{})
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string // "" = valid
	}{
		{"no streams", Config{Max: 3}, ""},
		{"both streams", Config{Streams: StreamsOf(env.Bus)}, ""},
		{"negative Max", Config{Max: -1}, "Max"},
		{"calls without results", Config{Streams: Streams{Calls: env.Bus.Calls}}, "Streams"},
		{"results without calls", Config{Streams: Streams{Results: env.Bus.Results}}, "Streams"},
	} {
		err := tc.cfg.WithDefaults().Validate()
		if tc.err == "" {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorContains(t, err, tc.err, tc.name)
		_, err = New(tc.cfg)
		require.ErrorContains(t, err, tc.err, tc.name)
	}
}
