package httpexec_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/toolwire/toolwire/internal/executors/httpexec"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestConfigYAML(t *testing.T) {
	t.Parallel()

	var cfg httpexec.Config
	require.NoError(t, yaml.Unmarshal([]byte(`
timeout: 30s
dial_timeout: 2s
max_response_bytes: 1048576
max_redirects: -1
allow_ports: [8080]
allow_networks: ["10.1.0.0/16"]
user_agent: acme-tools
`), &cfg))
	require.NoError(t, cfg.Validate())
	require.Equal(t, httpexec.Config{
		Timeout: httpexec.Duration(30 * time.Second), DialTimeout: httpexec.Duration(2 * time.Second),
		MaxResponseBytes: 1 << 20, MaxRedirects: -1, AllowPorts: []int{8080},
		AllowNetworks: []string{"10.1.0.0/16"}, UserAgent: "acme-tools",
	}, cfg)

	out, err := yaml.Marshal(httpexec.Config{Timeout: httpexec.Duration(90 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, "timeout: 1m30s\n", string(out))

	require.ErrorContains(t, yaml.Unmarshal([]byte("timeout: 30"), &cfg), "want a string")
	require.ErrorContains(t, yaml.Unmarshal([]byte("timeout: soon"), &cfg), "soon")
}

func TestConfigDefaultsAndValidate(t *testing.T) {
	t.Parallel()

	d := httpexec.Config{}.WithDefaults()
	require.Equal(t, httpexec.Duration(60*time.Second), d.Timeout)
	require.Equal(t, httpexec.Duration(10*time.Second), d.DialTimeout)
	require.EqualValues(t, 2<<20, d.MaxResponseBytes)
	require.Equal(t, 5, d.MaxRedirects)
	require.Equal(t, 16, d.MaxIdleConnsPerHost)
	require.Equal(t, "toolwire-httpexec", d.UserAgent)
	require.NotNil(t, d.Logger)
	require.NotNil(t, d.Resolver)

	for _, tt := range []struct {
		cfg   httpexec.Config
		field string
	}{
		{httpexec.Config{Timeout: -1}, "timeout"},
		{httpexec.Config{DialTimeout: -1}, "dial_timeout"},
		{httpexec.Config{MaxResponseBytes: -1}, "max_response_bytes"},
		{httpexec.Config{MaxRedirects: -2}, "max_redirects"},
		{httpexec.Config{MaxIdleConnsPerHost: -1}, "max_idle_conns_per_host"},
		{httpexec.Config{AllowPorts: []int{0}}, "allow_ports"},
		{httpexec.Config{AllowNetworks: []string{"10.0.0.0"}}, "allow_networks"},
		{httpexec.Config{AllowNetworks: []string{"::ffff:10.0.0.0/104"}}, "allow_networks"},
	} {
		require.ErrorContains(t, tt.cfg.Validate(), tt.field)
		_, err := httpexec.New(tt.cfg)
		require.ErrorContains(t, err, tt.field)
	}
}

// TestExecutorWideAllowlists: Config.AllowNetworks and AllowPorts open an
// address for every tool.
func TestExecutorWideAllowlists(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})
	spec := b.srv.spec("echo", "GET", "/echo?text=wide", nil, func(hc *toolwirev1.HttpConfig) {
		hc.AllowNetworks, hc.AllowPorts = nil, nil
	})
	_, err := call(t, b.exec, spec, `{}`)
	require.Error(t, err)

	wide, err := httpexec.New(httpexec.Config{AllowNetworks: []string{"127.0.0.1/32"}, AllowPorts: []int{int(b.srv.port)}})
	require.NoError(t, err)
	defer func() { _ = wide.Close(context.Background()) }()
	res, err := call(t, wide, spec, `{}`)
	require.NoError(t, err)
	require.Equal(t, "wide", text(t, res))
}
