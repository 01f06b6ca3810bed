package httpexec_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/httpexec"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// TestGzipBomb: 64 MiB of decompressed body from 64 KiB on the wire stops
// at the cap, counted after decompression.
func TestGzipBomb(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})
	spec := b.srv.spec("bomb", http.MethodGet, "/gzipbomb", nil, func(hc *toolwirev1.HttpConfig) { hc.MaxResponseBytes = 1 << 20 })
	start := time.Now()
	res, err := call(t, b.exec, spec, `{}`)
	require.NoError(t, err)
	got := text(t, res)
	require.True(t, strings.HasPrefix(got, strings.Repeat("a", 1<<20)), "decompressed")
	require.Contains(t, got, "[truncated: the response exceeded max_response_bytes (1048576 bytes)]")
	require.Less(t, len(got), 1<<20+200)
	require.Less(t, time.Since(start), 10*time.Second)
}

func TestOversizedBodies(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{MaxResponseBytes: 1000})

	res, err := call(t, b.exec, b.srv.spec("big", http.MethodGet, "/big?bytes=5000", nil, nil), `{}`)
	require.NoError(t, err)
	got := text(t, res)
	require.Equal(t, strings.Repeat("x", 1000), got[:1000])
	require.Contains(t, got, "truncated", "executor default cap")

	res, err = call(t, b.exec, b.srv.spec("big", http.MethodGet, "/big?bytes=1000", nil, nil), `{}`)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("x", 1000), text(t, res), "exactly the cap is not truncated")

	res, err = call(t, b.exec, b.srv.spec("big", http.MethodGet, "/big?bytes=5000", nil,
		func(hc *toolwirev1.HttpConfig) { hc.MaxResponseBytes = 4000 }), `{}`)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("x", 4000), text(t, res)[:4000], "the tool's cap wins")

	_, err = call(t, b.exec, b.srv.spec("img", http.MethodGet, "/image", nil,
		func(hc *toolwirev1.HttpConfig) { hc.MaxResponseBytes = 10 }), `{}`)
	te := toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, te.Type, "a cut image is useless")
	require.Contains(t, te.Message, "max_response_bytes")

	_, err = call(t, b.exec, b.srv.spec("intents", http.MethodPost, "/intents", nil,
		func(hc *toolwirev1.HttpConfig) { hc.MaxResponseBytes = 10; hc.IntentsField = "intents" }), `{}`)
	te = toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, te.Type, "intents are never silently lost")
	require.Equal(t, sePossible, te.SideEffects)
}

func TestResponses(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})

	t.Run("JSON object: structured output and one text block", func(t *testing.T) {
		res, err := call(t, b.exec, b.srv.spec("s", http.MethodPost, "/structured", []string{"a", "b"}, nil), `{"b":[1,2],"a":"x"}`)
		require.NoError(t, err)
		require.Equal(t, `{"b":[1,2],"a":"x"}`, string(res.Structured))
		require.Equal(t, `{"b":[1,2],"a":"x"}`, text(t, res))
	})

	t.Run("intents field, removed from the output", func(t *testing.T) {
		res, err := call(t, b.exec, b.srv.spec("i", http.MethodPost, "/intents", nil,
			func(hc *toolwirev1.HttpConfig) { hc.IntentsField = "intents" }), `{}`)
		require.NoError(t, err)
		require.Equal(t, `{"ok":true,"after":1}`, string(res.Structured))
		require.Len(t, res.Intents, 2)
		require.Equal(t, "i1", res.Intents[0].GetId())
		require.Equal(t, "toolwire.test.first", res.Intents[0].GetType())
		require.Equal(t, `{"n":1}`, res.Intents[0].GetPayloadJson())
		require.Equal(t, "i2", res.Intents[1].GetId())
		require.Equal(t, `{"n":2}`, res.Intents[1].GetPayloadJson(), "payloads compacted")
	})

	t.Run("intents header", func(t *testing.T) {
		res, err := call(t, b.exec, b.srv.spec("i", http.MethodGet, "/intents-header", nil,
			func(hc *toolwirev1.HttpConfig) { hc.IntentsHeader = "x-intents" }), `{}`)
		require.NoError(t, err)
		require.Equal(t, "done", text(t, res))
		require.Len(t, res.Intents, 2)
		require.Equal(t, "toolwire.test.second", res.Intents[1].GetType())
		require.Equal(t, "i2", res.Intents[1].GetId())
	})

	t.Run("malformed intents", func(t *testing.T) {
		_, err := call(t, b.exec, b.srv.spec("i", http.MethodPost, "/intents", nil,
			func(hc *toolwirev1.HttpConfig) { hc.IntentsField = "ok" }), `{}`)
		te := toolErr(t, err)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, te.Type)
		require.Contains(t, te.Message, `field "ok"`)
	})

	t.Run("image", func(t *testing.T) {
		res, err := call(t, b.exec, b.srv.spec("img", http.MethodGet, "/image", nil, nil), `{}`)
		require.NoError(t, err)
		require.Equal(t, pngBytes, res.Content[0].GetImage().GetData())
		require.Equal(t, "image/png", res.Content[0].GetImage().GetMimeType())
	})

	t.Run("empty body", func(t *testing.T) {
		res, err := call(t, b.exec, b.srv.spec("e", http.MethodGet, "/echo", nil, nil), `{}`)
		require.NoError(t, err)
		require.Contains(t, text(t, res), "empty response body")
	})
}
