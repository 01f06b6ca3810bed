package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/pkg/tool"
)

// A call's page shows its partial output in the timeline, chunk by chunk
// in order, with the values of secret arguments redacted as everywhere.
func TestCallPageShowsPartialOutput(t *testing.T) {
	type in struct {
		User     string `json:"user"`
		Password string `json:"password" toolwire:"secret"`
	}
	stream := tool.Must(tool.New("stream", func(ctx context.Context, in in) (string, error) {
		for _, s := range []string{"first chunk for " + in.User, "second chunk", "checked " + in.Password} {
			if err := tool.PartialText(ctx, s); err != nil {
				return "", err
			}
		}
		return "streamed", nil
	}))
	u := startUI(t, []*tool.Tool{stream}, dispatch.Config{})
	r := call(t, u, acmeBot, "stream", `{"user":"ann","password":"hunter22-secret"}`)
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	waitFor(t, "the index has the call", func() bool { _, ok := u.UI.index.Get(r.CallId); return ok })

	res, body := u.signIn(t, readerKey).get("/ui/calls/" + r.CallId)
	require.Equal(t, http.StatusOK, res.StatusCode)
	first := strings.Index(body, "output 1: <span class=\"partial\" data-testid=\"partial\">first chunk for ann</span>")
	second := strings.Index(body, "output 2: <span class=\"partial\" data-testid=\"partial\">second chunk</span>")
	third := strings.Index(body, "output 3: <span class=\"partial\" data-testid=\"partial\">checked [REDACTED]</span>")
	require.True(t, first > 0 && second > first && third > second, "the chunks in order: %d %d %d", first, second, third)
	require.NotContains(t, body, "hunter22")
}
