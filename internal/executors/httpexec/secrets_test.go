package httpexec_test

import (
	"fmt"
	"net"
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

// secretSchema marks the argument token secret.
const secretSchema = `{"type":"object","properties":{"token":{"type":"string","x-toolwire-secret":true},"to":{"type":"string"}}}`

const argSecret = "arg-secret-5d1c09ab77 /&?"

// TestRedirectSendsNoReferer: net/http sends the redirecting URL (its
// query holds arguments) as Referer to the next host; the executor never
// lets it.
func TestRedirectSendsNoReferer(t *testing.T) {
	t.Parallel()
	b := setup(t, httpexec.Config{})
	other := newServer(t)
	spec := b.srv.spec("redirect-referer", http.MethodGet, "/redirect", nil, func(hc *toolwirev1.HttpConfig) {
		hc.QueryArgs = []string{"to", "token"}
		hc.AllowPorts = []int32{b.srv.port, other.port}
	})
	spec.InputSchemaJson = secretSchema
	res, err := call(t, b.exec, spec, fmt.Sprintf(`{"to":%q,"token":%q}`, other.URL+"/headers", argSecret))
	require.NoError(t, err)
	got := text(t, res)
	require.Contains(t, got, "User-Agent", "the second host answered with the headers it received")
	require.NotContains(t, got, "Referer")
	require.NotContains(t, got, "arg-secret")
}

// TestSecretArgumentsInErrorsAndLogs: net/http's error quotes the URL,
// secret query argument included; neither the error nor the debug log
// line shows it.
func TestSecretArgumentsInErrorsAndLogs(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close()) // nothing listens there now: connection refused

	b := setup(t, httpexec.Config{})
	spec := b.srv.spec("refused", http.MethodGet, "/echo", nil, func(hc *toolwirev1.HttpConfig) {
		hc.UrlTemplate = fmt.Sprintf("http://127.0.0.1:%d/v1/{token}", port)
		hc.QueryArgs = []string{"to"}
		hc.AllowPorts = []int32{int32(port)}
	})
	spec.InputSchemaJson = secretSchema
	_, err = call(t, b.exec, spec, fmt.Sprintf(`{"token":%q,"to":%q}`, argSecret, argSecret))
	te := toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, te.Type, te.Message)
	require.Contains(t, te.Message, "[REDACTED]")
	require.Contains(t, b.logs.String(), "http tool request failed")
	for _, s := range []string{te.Error(), b.logs.String()} {
		require.NotContains(t, s, "5d1c09ab77")
	}
}
