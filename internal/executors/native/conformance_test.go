package native_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/executors/executortest"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// TestConformance holds the native executor to the executor behaviour
// spec, with fixture tools declared the way a tool author declares them.
func TestConformance(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\nfixture")
	wav := []byte("RIFF\x00\x00\x00\x00WAVEfixture")
	var running atomic.Int32
	type textIn struct {
		Text string `json:"text"`
	}
	type empty struct{}
	type structuredOut struct {
		Text string `json:"text"`
	}
	fail := map[string]toolwirev1.ErrorType{}
	for _, typ := range []toolwirev1.ErrorType{
		toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT,
		toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, toolwirev1.ErrorType_ERROR_TYPE_AUTH,
		toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
	} {
		fail[strings.TrimPrefix(typ.String(), "ERROR_TYPE_")] = typ
	}
	tools := map[executortest.Fixture]*tool.Tool{
		executortest.Echo: tool.Must(tool.New("echo", func(_ context.Context, in textIn) (string, error) { return in.Text, nil })),
		executortest.Structured: tool.Must(tool.New("structured", func(_ context.Context, in textIn) (structuredOut, error) {
			return structuredOut(in), nil
		})),
		executortest.Image: tool.Must(tool.New("image", func(context.Context, empty) (*tool.Result, error) {
			return &tool.Result{Content: []*toolwirev1.Content{tool.Image(png, "image/png")}}, nil
		})),
		executortest.Audio: tool.Must(tool.New("audio", func(context.Context, empty) (*tool.Result, error) {
			return &tool.Result{Content: []*toolwirev1.Content{{Kind: &toolwirev1.Content_Audio{
				Audio: &toolwirev1.AudioContent{Data: wav, MimeType: "audio/wav"}}}}}, nil
		})),
		executortest.ResourceLink: tool.Must(tool.New("resource_link", func(context.Context, empty) (*tool.Result, error) {
			return &tool.Result{Content: []*toolwirev1.Content{{Kind: &toolwirev1.Content_ResourceLink{
				ResourceLink: &toolwirev1.ResourceLink{Uri: "file:///toolwire/link.txt", Name: "link.txt", MimeType: "text/plain"}}}}}, nil
		})),
		executortest.Resource: tool.Must(tool.New("resource", func(context.Context, empty) (*tool.Result, error) {
			return &tool.Result{Content: []*toolwirev1.Content{{Kind: &toolwirev1.Content_Resource{
				Resource: &toolwirev1.EmbeddedResource{Uri: "file:///toolwire/embedded.txt", MimeType: "text/plain",
					Contents: &toolwirev1.EmbeddedResource_Text{Text: "embedded"}}}}}}, nil
		})),
		executortest.Block: tool.Must(tool.New("block", func(ctx context.Context, _ empty) (string, error) {
			running.Add(1)
			defer running.Add(-1)
			<-ctx.Done()
			return "", ctx.Err()
		})),
		executortest.Progress: tool.Must(tool.New("progress", func(ctx context.Context, _ empty) (string, error) {
			for i := range 3 {
				tool.Progress(ctx, fmt.Sprintf("step %d", i+1), float64(i+1)*100/3)
			}
			return "done", nil
		})),
		executortest.Panic: tool.Must(tool.New("panic", func(context.Context, empty) (string, error) {
			panic("fixture panic")
		})),
		executortest.Big: tool.Must(tool.New("big", func(_ context.Context, in struct {
			Bytes int `json:"bytes"`
		}) (string, error) {
			return strings.Repeat("x", in.Bytes), nil
		})),
		executortest.Intents: tool.Must(tool.New("intents", func(ctx context.Context, _ empty) (string, error) {
			if err := tool.EmitIntent(ctx, "toolwire.test.first", map[string]int{"n": 1}); err != nil {
				return "", err
			}
			return "emitted", tool.EmitIntent(ctx, "toolwire.test.second", map[string]int{"n": 2})
		}, tool.WithIntents("toolwire.test.first", "toolwire.test.second"))),
		executortest.Fail: tool.Must(tool.New("fail", func(_ context.Context, in struct {
			Type string `json:"type"`
		}) (string, error) {
			return "", &tool.Error{Type: fail[in.Type], Message: "fixture failure " + in.Type, RetryAfter: time.Second}
		})),
	}
	all := make([]*tool.Tool, 0, len(tools))
	specs := map[executortest.Fixture]*toolwirev1.ToolSpec{}
	for f, tl := range tools {
		all = append(all, tl)
		specs[f] = tl.Spec()
	}
	exec, err := native.New(all...)
	if err != nil {
		t.Fatal(err)
	}
	executortest.Run(t, executortest.Subject{
		Executor: exec,
		Tools:    specs,
		Running:  func() bool { return running.Load() > 0 },
		Image:    png,
		Audio:    wav,
		Fail:     fail,
		BadArgs:  []byte(`{"text": {"not": "a string"}}`),
	})
}
