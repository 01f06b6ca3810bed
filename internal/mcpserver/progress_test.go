package mcpserver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Every progress notification a tool sends reaches the client, before the
// result, at every revision: 100 calls of a tool that reports progress 5
// times and returns at once (the path that lost the most) give 500 of
// 500. The SDK client hands notifications to its handler on a goroutine
// of their own, so a few may be counted just after CallTool returns; a
// notification the server did not write before the result never comes
// (the stream ends with it).
func TestEveryProgressNotificationArrives(t *testing.T) {
	t.Parallel()
	const calls, steps = 100, 5
	quick := tool.Must(tool.New("quick_progress", func(ctx context.Context, _ struct{}) (string, error) {
		for i := range steps {
			tool.Progress(ctx, fmt.Sprintf("step %d", i+1), float64(100*(i+1)/steps))
		}
		return "done", nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{quick}})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	for _, v := range mcpserver.ProtocolVersions {
		t.Run(v, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[string]int{}
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					seen[fmt.Sprint(r.Params.ProgressToken)]++
				}})
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: v})
			require.NoError(t, err)
			defer func() { _ = cs.Close() }()
			for i := range calls {
				params := &mcp.CallToolParams{Name: "quick_progress", Arguments: map[string]any{}}
				params.SetProgressToken(fmt.Sprintf("p%d", i))
				res, err := cs.CallTool(t.Context(), params)
				require.NoError(t, err)
				require.False(t, res.IsError, "%v", res.Content)
			}
			total := func() (n int) {
				mu.Lock()
				defer mu.Unlock()
				for _, c := range seen {
					n += c
				}
				return n
			}
			// Counted by the client's handler goroutine: give it a moment
			// (what was not written before the result never arrives).
			deadline := time.Now().Add(10 * time.Second)
			for total() < calls*steps && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			var short []string
			for i := range calls {
				if n := seen[fmt.Sprintf("p%d", i)]; n != steps {
					short = append(short, fmt.Sprintf("p%d:%d", i, n))
				}
			}
			require.Empty(t, short, "calls whose progress did not all arrive (token:count)")
		})
	}
}
