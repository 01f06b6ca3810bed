package mcpserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/mcpserver"
)

// Zero fields take their defaults; an invalid field is refused, named.
func TestConfigDefaultsAndValidate(t *testing.T) {
	t.Parallel()
	c := mcpserver.Config{}.WithDefaults()
	require.Equal(t, mcpserver.DefaultPageSize, c.PageSize)
	require.Equal(t, time.Second, c.TaskAfter)
	require.Equal(t, time.Second, c.TaskPollInterval)
	require.NotEmpty(t, c.Version)
	require.NotNil(t, c.Logger)
	require.Zero(t, c.MaxRequestBytes, "the dispatcher's, read by New")
	require.NoError(t, c.Validate())

	for _, tc := range []struct {
		name string
		cfg  mcpserver.Config
		err  string // "" = valid
	}{
		{"origins", mcpserver.Config{PublicURL: "https://tools.example.com", AllowedOrigins: []string{"http://localhost:3000", "https://app.example/"}}, ""},
		{"negative PageSize", mcpserver.Config{PageSize: -1}, "PageSize"},
		{"negative MaxRequestBytes", mcpserver.Config{MaxRequestBytes: -1}, "MaxRequestBytes"},
		{"negative TaskAfter", mcpserver.Config{TaskAfter: -time.Second}, "TaskAfter"},
		{"negative TaskPollInterval", mcpserver.Config{TaskPollInterval: -time.Second}, "TaskPollInterval"},
		{"PublicURL with a path", mcpserver.Config{PublicURL: "https://tools.example.com/mcp"}, "PublicURL"},
		{"PublicURL without a scheme", mcpserver.Config{PublicURL: "tools.example.com"}, "PublicURL"},
		{"an allowed origin that is none", mcpserver.Config{AllowedOrigins: []string{"localhost"}}, "AllowedOrigins"},
	} {
		err := tc.cfg.WithDefaults().Validate()
		if tc.err == "" {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorContains(t, err, tc.err, tc.name)
		}
	}
}
