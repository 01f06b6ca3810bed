package httpexec_test

import (
	"net/http"
	"testing"

	"github.com/toolwire/toolwire/internal/executors/executortest"
	"github.com/toolwire/toolwire/internal/executors/httpexec"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// TestConformance runs the shared executor suite against fixture tools
// declared as a user would, on a real server. Progress, ResourceLink and
// Resource have no HTTP form and are left out.
func TestConformance(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})
	s := b.srv
	query := func(names ...string) func(*toolwirev1.HttpConfig) {
		return func(hc *toolwirev1.HttpConfig) { hc.QueryArgs = names }
	}
	tools := map[executortest.Fixture]*toolwirev1.ToolSpec{
		executortest.Echo:       s.spec("echo", http.MethodGet, "/echo", []string{"text"}, query("text")),
		executortest.Structured: s.spec("structured", http.MethodPost, "/structured", []string{"text"}, nil),
		executortest.Image:      s.spec("image", http.MethodGet, "/image", nil, nil),
		executortest.Audio:      s.spec("audio", http.MethodGet, "/audio", nil, nil),
		// POST: a cancelled request that may have reached the server
		// reports unknown side effects.
		executortest.Block: s.spec("block", http.MethodPost, "/block", nil, nil),
		executortest.Panic: s.spec("panic", http.MethodPost, "/panic", nil, nil),
		executortest.Big:   s.spec("big", http.MethodGet, "/big", []string{"bytes"}, query("bytes")),
		executortest.Intents: s.spec("intents", http.MethodPost, "/intents", nil,
			func(hc *toolwirev1.HttpConfig) { hc.IntentsField = "intents" }),
		executortest.Fail: s.spec("fail", http.MethodGet, "/fail", []string{"type"}, query("type")),
	}
	for _, spec := range tools {
		if err := b.exec.CheckSpec(spec); err != nil {
			t.Fatal(err)
		}
	}
	executortest.Run(t, executortest.Subject{
		Executor: b.exec,
		Tools:    tools,
		Running:  func() bool { return s.running.Load() > 0 },
		Image:    pngBytes,
		Audio:    wavBytes,
		Fail: map[string]toolwirev1.ErrorType{
			"bad_request":   toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
			"unprocessable": toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
			"unauthorized":  toolwirev1.ErrorType_ERROR_TYPE_AUTH,
			"forbidden":     toolwirev1.ErrorType_ERROR_TYPE_AUTH,
			"not_found":     toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
			"conflict":      toolwirev1.ErrorType_ERROR_TYPE_CONFLICT,
			"teapot":        toolwirev1.ErrorType_ERROR_TYPE_PERMANENT,
			"rate_limit":    toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT,
			"server_error":  toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT,
			"unavailable":   toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT,
		},
		// An object cannot be a query parameter: the executor refuses it.
		BadArgs: []byte(`{"text":{"nested":true}}`),
		Expect: map[executortest.Fixture]toolwirev1.ErrorType{
			// A dropped connection is a transient failure, not a bug.
			executortest.Panic: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT,
		},
	})
}
