package httpexec_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/httpexec"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const (
	envSecret  = "env-secret-3f9a1c77d2"
	fileSecret = "file-secret-b81e0d4a66"
)

// TestSecrets: secret headers from the environment and from a file reach
// the server, and their values appear in no result, error or log line —
// not even when the server echoes them back.
func TestSecrets(t *testing.T) { // not parallel: t.Setenv
	t.Setenv("HTTPEXEC_TEST_KEY", envSecret)
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(fileSecret+"\n"), 0o600))

	b := setup(t, httpexec.Config{})
	secrets := func(hc *toolwirev1.HttpConfig) {
		hc.SecretHeaders = map[string]string{"X-Api-Key": "env:HTTPEXEC_TEST_KEY", "Authorization": "file:" + path}
		hc.Headers = map[string]string{"X-Fixed": "fixed"}
	}

	// The server receives them.
	spec := b.srv.spec("record", http.MethodPost, "/record/x", nil, secrets)
	require.NoError(t, httpexec.CheckSpec(spec))
	_, err := call(t, b.exec, spec, `{}`)
	require.NoError(t, err)
	got, _ := b.srv.lastRequest()
	require.Equal(t, envSecret, got.Header.Get("X-Api-Key"))
	require.Equal(t, fileSecret, got.Header.Get("Authorization"))
	require.Equal(t, "fixed", got.Header.Get("X-Fixed"))

	var seen []string
	// A server echoing every header: the values are redacted.
	res, err := call(t, b.exec, b.srv.spec("headers", http.MethodGet, "/headers", nil, secrets), `{}`)
	require.NoError(t, err)
	seen = append(seen, text(t, res), string(res.Structured))
	require.Contains(t, text(t, res), "[REDACTED]")

	// An error quoting one.
	_, err = call(t, b.exec, b.srv.spec("fail-echo", http.MethodGet, "/fail-echo", nil, secrets), `{}`)
	te := toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.Type)
	seen = append(seen, te.Error(), fmt.Sprint(te.Content))
	require.Contains(t, te.Message, "[REDACTED]")

	// A redirect to another port drops them.
	other := newServer(t)
	redirect := b.srv.spec("redirect", http.MethodGet, "/redirect?to="+other.URL+"/headers", nil, func(hc *toolwirev1.HttpConfig) {
		secrets(hc)
		hc.AllowPorts = []int32{b.srv.port, other.port}
	})
	res, err = call(t, b.exec, redirect, `{}`)
	require.NoError(t, err)
	require.NotContains(t, text(t, res), "X-Api-Key")
	require.NotContains(t, text(t, res), "Authorization")
	require.Contains(t, text(t, res), "X-Fixed", "fixed headers follow the redirect")

	// A secret that does not resolve names its reference only.
	missing := b.srv.spec("missing", http.MethodGet, "/headers", nil, func(hc *toolwirev1.HttpConfig) {
		hc.SecretHeaders = map[string]string{"X-Api-Key": "env:HTTPEXEC_TEST_UNSET"}
	})
	_, err = call(t, b.exec, missing, `{}`)
	te = toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, te.Type)
	require.Equal(t, seNone, te.SideEffects)
	require.Contains(t, te.Message, "env:HTTPEXEC_TEST_UNSET")
	seen = append(seen, te.Error())

	seen = append(seen, b.logs.String())
	require.Contains(t, b.logs.String(), "http tool request", "requests are logged at Debug")
	for _, s := range seen {
		require.NotContains(t, s, envSecret)
		require.NotContains(t, s, fileSecret)
	}
}

func TestSecretRefsChecked(t *testing.T) {
	t.Parallel()

	for _, ref := range []string{"plain-value", "env:", "env:1BAD", "env:A-B", "file:relative/path", "file:/a/../b", "vault:x"} {
		spec := &toolwirev1.ToolSpec{Name: "s", Config: &toolwirev1.ToolSpec_Http{Http: &toolwirev1.HttpConfig{
			UrlTemplate: "https://api.example.com/", SecretHeaders: map[string]string{"X-Key": ref}}}}
		err := httpexec.CheckSpec(spec)
		require.ErrorContains(t, err, "secret_headers", ref)
		require.True(t, strings.Contains(err.Error(), ref), "the error names the reference")
	}
}

// TestIdempotencyKey: every non-GET request carries the call id; GET
// requests carry none.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet} {
		_, err := b.exec.Execute(t.Context(), request(b.srv.spec("record", m, "/record/x", nil, nil), "01IDEMPOTENT", `{}`))
		require.NoError(t, err)
		got, _ := b.srv.lastRequest()
		want := "01IDEMPOTENT"
		if m == http.MethodGet {
			want = ""
		}
		require.Equal(t, want, got.Header.Get("Idempotency-Key"), m)
	}
}
