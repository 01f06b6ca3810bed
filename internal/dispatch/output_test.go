package dispatch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/output"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// logLines is the output of the log tools: n numbered lines, with a
// character of two bytes in each (so that ranges meet character
// boundaries), and the secret argument in line 7.
func logLines(n int, secret string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %05d: résultat", i)
		if i == 7 {
			b.WriteString(" token=" + secret)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

type logArgs struct {
	Lines  int    `json:"lines"`
	Secret string `json:"secret" toolwire:"secret"`
}

// logTool returns n lines (20,000 make 420 KB: under the inline limit of
// the encoded response, over the tool's limits of 4 KB and 100 lines).
func logTool(name string, dir toolwirev1.TruncateDirection) *tool.Tool {
	return tool.Must(tool.New(name, func(_ context.Context, in logArgs) (string, error) {
		return logLines(in.Lines, in.Secret), nil
	}, tool.Idempotent(), tool.WithLimits(&toolwirev1.Limits{MaxOutputBytes: 4096, MaxOutputLines: 100, Truncate: dir})))
}

// A tool limited to 4 KB and 100 lines answers at most that inline, from
// the head or the tail as it says, marked truncated; the whole output is
// read back with GetOutput (ranges and patterns), only by its tenant, and
// without the secret argument.
func TestOutputLimitsAndGetOutput(t *testing.T) {
	t.Parallel()
	tools := append(builtin.Tools(),
		logTool("log_head", toolwirev1.TruncateDirection_TRUNCATE_DIRECTION_UNSPECIFIED),
		logTool("log_tail", toolwirev1.TruncateDirection_TRUNCATE_DIRECTION_TAIL))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: tools})
	ctx := t.Context()
	const secret = "s3cr3t-value-42"
	// What the tool returned, as stored: the secret redacted.
	full := strings.Replace(logLines(20000, secret), secret, redact.Redacted, 1)

	for _, tc := range []struct {
		tool string
		tail bool
	}{{"log_head", false}, {"log_tail", true}} {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			r := call(t, s.Client, &toolwirev1.CallRequest{Tool: tc.tool,
				ArgumentsJson: fmt.Sprintf(`{"lines":20000,"secret":%q}`, secret)})
			require.True(t, r.Response.Ok, "%v", r.Response.Error)
			m := r.Response.Meta
			require.True(t, m.Truncated)
			require.NotNil(t, m.FullOutput)
			require.NotNil(t, m.FullText)

			inline := output.Text(r.Response)
			require.LessOrEqual(t, len(inline), 4096, "inline bytes")
			require.Equal(t, int64(100), output.Lines(inline), "inline lines: the limit, the marker's included")
			require.NotContains(t, inline, secret)
			blocks := r.Response.Content
			require.Len(t, blocks, 2, "the kept text and the marker")
			if tc.tail {
				require.Contains(t, blocks[0].GetText().Text, "[output truncated: showing the last 99 of 20000 lines")
				kept := blocks[1].GetText().Text
				require.True(t, strings.HasSuffix(full, kept), "the tail is kept")
				require.True(t, strings.HasPrefix(kept, "line 19902: "), "whole lines: %.40q", kept)
			} else {
				kept := blocks[0].GetText().Text
				require.True(t, strings.HasPrefix(full, kept), "the head is kept")
				require.Contains(t, blocks[1].GetText().Text, "[output truncated: showing the first 99 of 20000 lines")
				require.Contains(t, blocks[1].GetText().Text, fmt.Sprintf("toolctl output %s --offset %d", r.CallId, len(kept)))
			}

			// The whole output, page by page: exactly what the tool returned
			// (redacted), every page within its limit and on characters.
			var got strings.Builder
			var offset int64
			for pages := 0; ; pages++ {
				require.Less(t, pages, 100)
				o, err := s.Dispatcher.GetOutput(ctx, identity.Default,
					&toolwirev1.GetOutputRequest{CallId: r.CallId, Offset: offset, Limit: 50001})
				require.NoError(t, err)
				require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, o.State)
				require.True(t, o.Truncated)
				require.Equal(t, offset, o.Offset)
				require.LessOrEqual(t, len(o.Text), 50001)
				got.WriteString(o.Text)
				offset = o.NextOffset
				if o.Eof {
					require.Equal(t, o.Size, o.NextOffset)
					break
				}
			}
			require.NotContains(t, got.String(), secret, "secrets are redacted before the output is stored")
			require.Equal(t, full, got.String())

			// A range from the middle of a character starts at the next.
			mid := int64(strings.Index(full, "é") + 1)
			o, err := s.Dispatcher.GetOutput(ctx, identity.Default,
				&toolwirev1.GetOutputRequest{CallId: r.CallId, Offset: mid, Limit: 10})
			require.NoError(t, err)
			require.Equal(t, mid+1, o.Offset)
			require.Equal(t, "sultat\nlin", o.Text)

			// Lines by pattern, numbered, from an offset, paged by limit.
			o, err = s.Dispatcher.GetOutput(ctx, identity.Default,
				&toolwirev1.GetOutputRequest{CallId: r.CallId, Grep: `^line 1234[0-9]:`})
			require.NoError(t, err)
			require.Len(t, o.Lines, 10)
			require.Equal(t, int64(12340), o.Lines[0].Number)
			require.Equal(t, "line 12340: résultat", o.Lines[0].Text)
			require.Equal(t, int64(strings.Index(full, "line 12340:")), o.Lines[0].Offset)
			require.True(t, o.Eof)
			o, err = s.Dispatcher.GetOutput(ctx, identity.Default,
				&toolwirev1.GetOutputRequest{CallId: r.CallId, Grep: `^line 1234[0-9]:`, Offset: o.Lines[5].Offset, Limit: 40})
			require.NoError(t, err)
			require.Len(t, o.Lines, 1, "the limit pages the matches")
			require.Equal(t, int64(12345), o.Lines[0].Number)
			require.False(t, o.Eof)
			require.Equal(t, int64(strings.Index(full, "line 12346:")), o.NextOffset)

			// Another tenant learns nothing; neither from the API.
			other := identity.Identity{Tenant: "other", Agent: "a", Scopes: []string{"*"}}
			o, err = s.Dispatcher.GetOutput(ctx, other, &toolwirev1.GetOutputRequest{CallId: r.CallId})
			require.NoError(t, err)
			require.NotEqual(t, toolwirev1.CallState_CALL_STATE_DONE, o.State)
			require.Empty(t, o.Text)
			require.Zero(t, o.Size)
		})
	}
}

// GetOutput of a call whose output was not cut reads the inline response;
// unknown calls, bad patterns and negative ranges are answered as such.
func TestGetOutputOfInlineOutputAndBadRequests(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()
	r := call(t, s.Client, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"one\ntwo\nthree"}`})
	o, err := s.Client.GetOutput(ctx, connect.NewRequest(&toolwirev1.GetOutputRequest{CallId: r.CallId, Offset: 4}))
	require.NoError(t, err)
	require.Equal(t, "two\nthree", o.Msg.Text)
	require.False(t, o.Msg.Truncated)
	require.True(t, o.Msg.Eof)
	require.Equal(t, int64(13), o.Msg.Size)
	o, err = s.Client.GetOutput(ctx, connect.NewRequest(&toolwirev1.GetOutputRequest{CallId: r.CallId, Grep: "t"}))
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, []int64{o.Msg.Lines[0].Number, o.Msg.Lines[1].Number})

	_, err = s.Client.GetOutput(ctx, connect.NewRequest(&toolwirev1.GetOutputRequest{CallId: "01J00000000000000000000009"}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "an id nobody admitted")

	for _, req := range []*toolwirev1.GetOutputRequest{
		{CallId: r.CallId, Grep: "("},
		{CallId: r.CallId, Grep: strings.Repeat("a", output.MaxPatternBytes+1)},
		{CallId: r.CallId, Grep: "(a{1,100}){1,100}"}, // compiles to too many instructions
		{CallId: r.CallId, Offset: -1},
		{CallId: r.CallId, Limit: -1},
	} {
		_, err = s.Client.GetOutput(ctx, connect.NewRequest(req))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v: %v", req, err)
	}
}

// The full output of a result whose blob the store no longer holds is
// answered not_found, with the reason.
func TestGetOutputOfARemovedBlob(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{logTool("log_head", 0)}})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r := call(t, s.Client, &toolwirev1.CallRequest{Tool: "log_head", ArgumentsJson: `{"lines":500,"secret":"x"}`})
	require.True(t, r.Response.Meta.Truncated, "%v", r.Response)
	require.NoError(t, s.Env.Bus.Blobs.Delete(ctx, r.Response.Meta.FullText.Name))
	_, err := s.Client.GetOutput(ctx, connect.NewRequest(&toolwirev1.GetOutputRequest{CallId: r.CallId}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "no longer stored")
}
