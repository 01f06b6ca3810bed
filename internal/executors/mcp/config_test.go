package mcp_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/toolwire/toolwire/internal/executors/mcp"
)

func TestConfigFromYAML(t *testing.T) {
	t.Parallel()
	var cfg mcp.Config
	require.NoError(t, yaml.UnmarshalStrict([]byte(`
servers:
  - name: files
    required: true
    stdio:
      command: /usr/local/bin/files-mcp
      args: ["--root", "/srv"]
      env: [HOME]
      set_env: {LOG_LEVEL: warn}
      dir: /srv
  - name: search
    sessions: per_session
    max_sessions: 64
    session_idle: 10m
    http:
      url: https://search.internal/mcp
      headers: {X-Team: agents}
      secret_headers: {Authorization: "env:SEARCH_TOKEN"}
connect_timeout: 5s
terminate_duration: 250ms
`), &cfg))
	require.NoError(t, cfg.Validate())
	require.Equal(t, mcp.Duration(5*time.Second), cfg.ConnectTimeout)
	require.Equal(t, []string{"--root", "/srv"}, cfg.Servers[0].Stdio.Args)
	require.Equal(t, "env:SEARCH_TOKEN", cfg.Servers[1].HTTP.SecretHeaders["Authorization"])

	d := cfg.WithDefaults()
	require.Equal(t, mcp.Duration(5*time.Second), d.StartupWait, "start-up wait defaults to the connect timeout")
	require.Equal(t, mcp.Duration(250*time.Millisecond), d.TerminateDuration)
	require.Equal(t, mcp.Duration(10*time.Second), d.SessionWait)
	require.Equal(t, mcp.Duration(time.Second), mcp.Config{}.WithDefaults().TerminateDuration)
	require.Equal(t, mcp.SessionsPerTenant, d.Servers[0].Sessions, "per tenant unless said otherwise")
	require.Equal(t, 4, d.Servers[0].MaxSessions, "a stdio session is a process")
	require.Equal(t, mcp.Duration(5*time.Minute), d.Servers[0].SessionIdle)
	require.Equal(t, mcp.SessionsPerSession, d.Servers[1].Sessions)
	require.Equal(t, 64, d.Servers[1].MaxSessions)
	require.Equal(t, 16, d.Servers[1].MaxSessionsPerTenant, "a quarter of max_sessions")
	require.Equal(t, 1, d.Servers[0].MaxSessionsPerTenant, "at least one")
	require.Equal(t, mcp.Duration(10*time.Minute), d.Servers[1].SessionIdle)
	require.Equal(t, 16, mcp.ServerConfig{HTTP: &mcp.HTTPConfig{}}.WithDefaults().MaxSessions)
	require.Empty(t, cfg.Servers[0].Sessions, "WithDefaults leaves its receiver's servers alone")

	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	require.Contains(t, string(out), "connect_timeout: 5s")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  mcp.Config
		want string
	}{
		{"bad name", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a.b", HTTP: &mcp.HTTPConfig{URL: "http://x"}}}}, "mcp.servers[0].name"},
		{"underscore", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a_b", HTTP: &mcp.HTTPConfig{URL: "http://x"}}}}, "mcp.servers[0].name"},
		{"duplicate", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", HTTP: &mcp.HTTPConfig{URL: "http://x"}}, {Name: "a", HTTP: &mcp.HTTPConfig{URL: "http://y"}}}}, "duplicate server"},
		{"neither", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a"}}}, "exactly one of stdio and http"},
		{"both", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", Stdio: &mcp.StdioConfig{Command: "x"}, HTTP: &mcp.HTTPConfig{URL: "http://x"}}}}, "exactly one"},
		{"no command", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", Stdio: &mcp.StdioConfig{}}}}, "stdio.command"},
		{"bad env", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", Stdio: &mcp.StdioConfig{Command: "x", Env: []string{"A=B"}}}}}, "stdio.env"},
		{"bad url", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", HTTP: &mcp.HTTPConfig{URL: "ftp://x"}}}}, "http.url"},
		{"bad secret", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", HTTP: &mcp.HTTPConfig{URL: "http://x", SecretHeaders: map[string]string{"A": "vault:x"}}}}}, "secret_headers[A]"},
		{"relative file", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", HTTP: &mcp.HTTPConfig{URL: "http://x", SecretHeaders: map[string]string{"A": "file:x"}}}}}, "an absolute, clean path"},
		{"negative", mcp.Config{SessionWait: -1}, "mcp.session_wait"},
		{"sessions", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", HTTP: &mcp.HTTPConfig{URL: "http://x"}, Sessions: "per_user"}}}, "mcp.servers[0].sessions"},
		{"max sessions", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", HTTP: &mcp.HTTPConfig{URL: "http://x"}, MaxSessions: 5000}}}, "mcp.servers[0].max_sessions"},
		{"per tenant", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", HTTP: &mcp.HTTPConfig{URL: "http://x"}, MaxSessions: 4, MaxSessionsPerTenant: 5}}}, "mcp.servers[0].max_sessions_per_tenant"},
		{"session idle", mcp.Config{Servers: []mcp.ServerConfig{{Name: "a", HTTP: &mcp.HTTPConfig{URL: "http://x"}, SessionIdle: -1}}}, "mcp.servers[0].session_idle"},
		{"backoff", mcp.Config{MinBackoff: mcp.Duration(time.Minute), MaxBackoff: mcp.Duration(time.Second)}, "mcp.min_backoff"},
	} {
		require.ErrorContains(t, tt.cfg.Validate(), tt.want, tt.name)
	}
	_, err := mcp.New(t.Context(), mcp.Config{Servers: []mcp.ServerConfig{{Name: "a"}}}, mcp.Options{})
	require.ErrorContains(t, err, "mcp: config")
}

// TestHTTPSecretHeaders: headers come from the environment and files at
// connection time, and their values never reach the logs.
func TestHTTPSecretHeaders(t *testing.T) {
	const envName = "TOOLWIRE_MCP_TEST_TOKEN"
	t.Setenv(envName, "env-secret-value")
	file := filepath.Join(tempDir(t), "key")
	require.NoError(t, os.WriteFile(file, []byte("file-secret-value\n"), 0o600))

	var mu sync.Mutex
	var seen []http.Header
	srv := newFixtureServer(fixtureOptions{running: tempDir(t)})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })

	logs := &syncBuffer{}
	cfg := testConfig(mcp.ServerConfig{Name: "sec", Required: true, HTTP: &mcp.HTTPConfig{
		URL:           ts.URL,
		Headers:       map[string]string{"X-Team": "agents"},
		SecretHeaders: map[string]string{"Authorization": "env:" + envName, "X-Api-Key": "file:" + file},
	}})
	e := newExecutor(t, cfg, mcp.Options{Logger: bufferLogger(logs)})
	res, err := execute(e, specsByTool(e)["echo"], `{"text":"hi"}`)
	require.NoError(t, err)
	require.Equal(t, "hi", res.Content[0].GetText().GetText())

	mu.Lock()
	require.NotEmpty(t, seen)
	for _, h := range seen {
		require.Equal(t, "env-secret-value", h.Get("Authorization"))
		require.Equal(t, "file-secret-value", h.Get("X-Api-Key"))
		require.Equal(t, "agents", h.Get("X-Team"))
	}
	mu.Unlock()

	// A missing secret fails the connection, naming the reference only.
	bad := testConfig(mcp.ServerConfig{Name: "sec", Required: true, HTTP: &mcp.HTTPConfig{
		URL: ts.URL, SecretHeaders: map[string]string{"Authorization": "env:TOOLWIRE_MCP_TEST_UNSET"}}})
	bad.StartupWait = mcp.Duration(2 * time.Second)
	_, err = mcp.New(t.Context(), bad, mcp.Options{Logger: bufferLogger(logs)})
	require.ErrorContains(t, err, "secret env:TOOLWIRE_MCP_TEST_UNSET: the variable is not set")
	require.NotContains(t, logs.String(), "secret-value")
}
