package httpexec_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/httpexec"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const (
	seNone     = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
	sePossible = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE
	seUnknown  = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
)

func TestStatusMapping(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})
	specs := map[string]*toolwirev1.ToolSpec{}
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		specs[m] = b.srv.spec("fail", m, "/fail", []string{"type", "retry_after"},
			func(hc *toolwirev1.HttpConfig) { hc.QueryArgs = []string{"type", "retry_after"} })
	}
	for _, tt := range []struct {
		name       string
		want       toolwirev1.ErrorType
		retryable  bool
		postEffect toolwirev1.PartialSideEffects // GET always none
	}{
		{"bad_request", toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, false, seNone},
		{"unprocessable", toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, false, seNone},
		{"unauthorized", toolwirev1.ErrorType_ERROR_TYPE_AUTH, false, seNone},
		{"forbidden", toolwirev1.ErrorType_ERROR_TYPE_AUTH, false, seNone},
		{"not_found", toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, false, seNone},
		{"gone", toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, false, seNone},
		{"conflict", toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, false, seNone},
		{"teapot", toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, false, seNone},
		{"timeout", toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, true, seNone},
		{"rate_limit", toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, true, seNone},
		{"server_error", toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, true, sePossible},
		{"bad_gateway", toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, true, sePossible},
		{"unavailable", toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, true, sePossible},
		{"not_impl", toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, false, sePossible},
	} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			t.Run(tt.name+"/"+m, func(t *testing.T) {
				t.Parallel()
				res, err := call(t, b.exec, specs[m], `{"type":"`+tt.name+`"}`)
				require.Nil(t, res)
				te := toolErr(t, err)
				code := failStatuses[tt.name]
				require.Equal(t, tt.want, te.Type)
				require.Equal(t, tt.retryable, te.Retryable)
				want := tt.postEffect
				if m == http.MethodGet {
					want = seNone
				}
				require.Equal(t, want, te.SideEffects)
				require.Contains(t, te.Message, http.StatusText(code))
				require.Contains(t, te.Message, `{"error":"failed with`, "the message quotes the body")
				require.JSONEq(t, `{"error":"failed with `+strconv.Itoa(code)+`"}`, string(te.Structured))
				require.Len(t, te.Content, 1, "the body is the error's content")
			})
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})
	spec := b.srv.spec("fail", http.MethodGet, "/fail", []string{"type", "retry_after"},
		func(hc *toolwirev1.HttpConfig) { hc.QueryArgs = []string{"type", "retry_after"} })

	_, err := call(t, b.exec, spec, `{"type":"rate_limit","retry_after":"7"}`)
	te := toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, te.Type)
	require.Equal(t, 7*time.Second, te.RetryAfter, "delay-seconds")

	date := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	_, err = call(t, b.exec, spec, `{"type":"rate_limit","retry_after":"`+date+`"}`)
	te = toolErr(t, err)
	require.InDelta(t, 30*time.Second, te.RetryAfter, float64(2*time.Second), "HTTP date")

	_, err = call(t, b.exec, spec, `{"type":"rate_limit","retry_after":"soon"}`)
	require.Zero(t, toolErr(t, err).RetryAfter, "an invalid value is ignored")

	_, err = call(t, b.exec, spec, `{"type":"unavailable","retry_after":"3"}`)
	te = toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, te.Type)
	require.Equal(t, 3*time.Second, te.RetryAfter, "a 503 may say when to come back")
}

// TestConnectionErrors: a refused connection sent nothing; a dropped one
// may have, for a POST.
func TestConnectionErrors(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	require.NoError(t, ln.Close()) // nothing listens there now

	for _, m := range []string{http.MethodGet, http.MethodPost} {
		hc := &toolwirev1.HttpConfig{Method: m, UrlTemplate: "http://127.0.0.1:" + strconv.Itoa(int(port)) + "/",
			AllowNetworks: []string{"127.0.0.1/32"}, AllowPorts: []int32{port}}
		_, err := call(t, b.exec, &toolwirev1.ToolSpec{Name: "refused", Config: &toolwirev1.ToolSpec_Http{Http: hc}}, `{}`)
		te := toolErr(t, err)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, te.Type, "%v", err)
		require.True(t, te.Retryable)
		require.Equal(t, seNone, te.SideEffects, "connection refused: nothing was sent")
	}

	for m, want := range map[string]toolwirev1.PartialSideEffects{http.MethodGet: seNone, http.MethodPost: sePossible} {
		_, err := call(t, b.exec, b.srv.spec("panic", m, "/panic", nil, nil), `{}`)
		te := toolErr(t, err)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, te.Type)
		require.Equal(t, want, te.SideEffects, m)
	}
}

// TestTimeouts: the executor's own timeout and the call's deadline both
// cut a slow body, as TIMEOUT; a cancel is CANCELLED with its cause.
func TestTimeouts(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{Timeout: httpexec.Duration(300 * time.Millisecond)})
	start := time.Now()
	_, err := call(t, b.exec, b.srv.spec("slow", http.MethodGet, "/slow", nil, nil), `{}`)
	te := toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, te.Type, "%v", err)
	require.True(t, te.Retryable)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Contains(t, te.Message, "executor's timeout")

	long := setup(t, httpexec.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = callCtx(ctx, long.exec, long.srv.spec("slow", http.MethodGet, "/slow", nil, nil), `{}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, toolErr(t, err).Type)

	ctx, cancelCause := context.WithCancelCause(t.Context())
	cancelCause(errors.New("the user pressed stop"))
	_, err = callCtx(ctx, long.exec, long.srv.spec("echo", http.MethodGet, "/echo", nil, nil), `{}`)
	te = toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, te.Type)
	require.Contains(t, te.Message, "the user pressed stop")
}

// TestUntrustedCertificate: a certificate that does not verify is
// PERMANENT, and nothing was sent.
func TestUntrustedCertificate(t *testing.T) {
	t.Parallel()

	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the request reached the server")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	t.Cleanup(srv.Close)
	port := int32(srv.Listener.Addr().(*net.TCPAddr).Port)

	b := setup(t, httpexec.Config{})
	hc := &toolwirev1.HttpConfig{Method: http.MethodPost, UrlTemplate: srv.URL + "/",
		AllowNetworks: []string{"127.0.0.1/32"}, AllowPorts: []int32{port}}
	_, err := call(t, b.exec, &toolwirev1.ToolSpec{Name: "tls", Config: &toolwirev1.ToolSpec_Http{Http: hc}}, `{}`)
	te := toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, te.Type, "%v", err)
	require.Equal(t, seNone, te.SideEffects)
}
