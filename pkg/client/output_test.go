package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A response cut to the tool's limits is read whole with GetOutput.
func TestGetOutput(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789\n", 1000)
	lines := tool.Must(tool.New("lines", func(context.Context, struct{}) (string, error) { return long, nil },
		tool.WithLimits(&toolwirev1.Limits{MaxOutputLines: 10, Truncate: toolwirev1.TruncateDirection_TRUNCATE_DIRECTION_TAIL})))
	b := setup(t, dispatchtest.Options{Tools: []*tool.Tool{lines}})
	res, err := b.client.Call(t.Context(), "lines", nil)
	require.NoError(t, err)
	require.True(t, res.Response.GetMeta().GetTruncated())
	marker, kept, _ := strings.Cut(res.Text(), "\n")
	require.Contains(t, marker, "output truncated")
	require.Equal(t, strings.Repeat("0123456789\n", 9), kept, "10 lines inline, the marker's included")

	var got strings.Builder
	q := client.OutputQuery{Limit: 4000}
	for {
		o, err := b.client.GetOutput(t.Context(), res.CallID, q)
		require.NoError(t, err)
		got.WriteString(o.GetText())
		if o.GetEof() {
			break
		}
		q.Offset = o.GetNextOffset()
	}
	require.Equal(t, long, got.String())

	o, err := b.client.GetOutput(t.Context(), res.CallID, client.OutputQuery{Grep: "^$"})
	require.NoError(t, err)
	require.Empty(t, o.GetLines())

	_, err = b.client.GetOutput(t.Context(), "01J00000000000000000000009", client.OutputQuery{})
	require.ErrorIs(t, err, client.ErrUnknownCall)
}
