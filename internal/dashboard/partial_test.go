package dashboard

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
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
	// The worker holds back the end of each chunk's text (the call has a
	// secret argument), so the chunks are cut where it published them: the
	// text, joined, is the tool's, in order, the secret redacted.
	var text strings.Builder
	for i, m := range regexp.MustCompile(`output (\d+): <span class="partial" data-testid="partial">([^<]*)</span>`).FindAllStringSubmatch(body, -1) {
		require.Equal(t, strconv.Itoa(i+1), m[1], "in order")
		text.WriteString(m[2])
	}
	require.Equal(t, "first chunk for annsecond chunkchecked [REDACTED]", text.String())
	require.NotContains(t, body, "hunter22")
}
