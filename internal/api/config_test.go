package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/api"
	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/limitgate"
	"github.com/toolwire/toolwire/internal/policyops"
)

// The dispatcher and its components are what the process hands over.
var (
	_ api.Core      = (*dispatch.Dispatcher)(nil)
	_ api.Approvals = (*approvalflow.Flow)(nil)
	_ api.Policies  = (*policyops.Ops)(nil)
	_ api.Usage     = (*limitgate.Gate)(nil)
)

// Zero fields take their defaults; a missing part or an invalid field is
// refused, named.
func TestConfigDefaultsAndValidate(t *testing.T) {
	t.Parallel()
	full := api.Config{Core: (*dispatch.Dispatcher)(nil), Approvals: (*approvalflow.Flow)(nil),
		Policies: (*policyops.Ops)(nil), Usage: (*limitgate.Gate)(nil)}
	c := full.WithDefaults()
	require.Equal(t, api.DefaultCompressMinBytes, c.CompressMinBytes)
	require.NoError(t, c.Validate())

	for _, tc := range []struct {
		name string
		edit func(*api.Config)
		err  string
	}{
		{"no Core", func(c *api.Config) { c.Core = nil }, "Core"},
		{"no Approvals", func(c *api.Config) { c.Approvals = nil }, "Approvals"},
		{"no Policies", func(c *api.Config) { c.Policies = nil }, "Policies"},
		{"no Usage", func(c *api.Config) { c.Usage = nil }, "Usage"},
		{"negative CompressMinBytes", func(c *api.Config) { c.CompressMinBytes = -1 }, "CompressMinBytes"},
	} {
		cfg := full
		tc.edit(&cfg)
		_, err := api.NewService(cfg)
		require.ErrorContains(t, err, tc.err, tc.name)
	}
}
