package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
)

// partialNote is what a client reads of a progress notification carrying
// partial output.
type partialNote struct {
	message string
	seq     uint32
	text    string
}

// A client that gave a progress token receives the call's partial output
// as notifications/progress, in order, while the call runs, at every
// revision: the text as the message, the blocks in
// _meta["io.toolwire/partial"]. The tool does not return until the client
// has seen its last chunk, so every chunk came before the result; the
// result is what the tool returned.
func TestPartialOutputReachesTheClientBeforeTheResult(t *testing.T) {
	t.Parallel()
	const n = 4
	var waits sync.Map // key → chan struct{}, closed when the client saw chunk n
	type in struct {
		Key string `json:"key"`
	}
	stream := tool.Must(tool.New("stream", func(ctx context.Context, in in) (string, error) {
		ch, ok := waits.Load(in.Key)
		if !ok {
			return "", fmt.Errorf("unknown key %q", in.Key)
		}
		for i := range n {
			if err := tool.PartialText(ctx, fmt.Sprintf("part %d\n", i+1)); err != nil {
				return "", err
			}
		}
		select {
		case <-ch.(chan struct{}):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "whole answer", nil
	}, tool.ReadOnly()))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{stream}})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	for _, v := range mcpserver.ProtocolVersions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			seen := make(chan struct{})
			waits.Store(v, seen)
			var mu sync.Mutex
			var notes []partialNote
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					notes = append(notes, readPartial(t, r.Params))
					if len(notes) == n {
						close(seen)
					}
				}})
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: v})
			require.NoError(t, err)
			defer func() { _ = cs.Close() }()
			params := &mcp.CallToolParams{Name: "stream", Arguments: map[string]any{"key": v}}
			params.SetProgressToken("tok-" + v)
			res, err := cs.CallTool(t.Context(), params)
			require.NoError(t, err)
			require.False(t, res.IsError, "%v", res.Content)
			require.Len(t, res.Content, 1)
			require.Equal(t, "whole answer", res.Content[0].(*mcp.TextContent).Text, "the result is unchanged")

			mu.Lock()
			defer mu.Unlock()
			require.Len(t, notes, n)
			for i, note := range notes {
				want := fmt.Sprintf("part %d\n", i+1)
				require.Equal(t, partialNote{message: want, seq: uint32(i + 1), text: want}, note)
			}
		})
	}
}

// readPartial reads the message and MetaPartial of a progress
// notification as a client would, from its JSON.
func readPartial(t *testing.T, p *mcp.ProgressNotificationParams) partialNote {
	b, err := json.Marshal(p.Meta[mcpserver.MetaPartial])
	if err != nil {
		t.Errorf("meta: %v", err)
		return partialNote{}
	}
	var m struct {
		Seq     uint32 `json:"seq"`
		Attempt int32  `json:"attempt"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(b, &m); err != nil || len(m.Content) != 1 || m.Content[0].Type != "text" || m.Attempt != 1 {
		t.Errorf("meta %s: %v", b, err)
		return partialNote{}
	}
	return partialNote{message: p.Message, seq: m.Seq, text: m.Content[0].Text}
}

// The progress of a request's notifications only increases, whatever the
// mix of percentages and chunks of partial output (MCP requires it).
func TestProgressNeverGoesDown(t *testing.T) {
	t.Parallel()
	const n = 5
	seen := make(chan struct{})
	mixed := tool.Must(tool.New("mixed", func(ctx context.Context, _ struct{}) (string, error) {
		tool.Progress(ctx, "most", 80)
		if err := tool.PartialText(ctx, "a"); err != nil {
			return "", err
		}
		tool.Progress(ctx, "less", 50)
		if err := tool.PartialText(ctx, "b"); err != nil {
			return "", err
		}
		tool.Progress(ctx, "all", 100)
		select {
		case <-seen:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "done", nil
	}, tool.ReadOnly()))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{mixed}})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	var mu sync.Mutex
	var progress []float64
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, r.Params.Progress)
			if len(progress) == n {
				close(seen)
			}
		}})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	require.NoError(t, err)
	defer func() { _ = cs.Close() }()
	params := &mcp.CallToolParams{Name: "mixed", Arguments: map[string]any{}}
	params.SetProgressToken("tok")
	res, err := cs.CallTool(t.Context(), params)
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, progress, n)
	for i := 1; i < n; i++ {
		require.Greater(t, progress[i], progress[i-1], "progress %v", progress)
	}
}
