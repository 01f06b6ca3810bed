package dashboard

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
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

// A chunk of partial output stored twice (a signed message replayed into
// the events stream) is shown once.
func TestCallPageShowsAReplayedChunkOnce(t *testing.T) {
	once := tool.Must(tool.New("once", func(ctx context.Context, _ struct{}) (string, error) {
		if err := tool.PartialText(ctx, "only chunk"); err != nil {
			return "", err
		}
		return "streamed", nil
	}))
	u := startUI(t, []*tool.Tool{once}, dispatch.Config{})
	r := call(t, u, acmeBot, "once", `{}`)
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())

	ctx := t.Context()
	cons, err := u.Env.Bus.Events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{u.Env.Bus.Subjects.EventsAnyDispatcher(acmeBot.Tenant, r.CallId)}})
	require.NoError(t, err)
	var chunk jetstream.Msg
	for chunk == nil {
		m, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		require.NoError(t, err, "the chunk is stored")
		ev := &toolwirev1.CallEvent{}
		if proto.Unmarshal(m.Data(), ev) == nil && ev.GetPartialSeq() == 1 {
			chunk = m
		}
	}
	_, err = u.Env.Bus.JS.PublishMsg(ctx, &nats.Msg{Subject: chunk.Subject(), Header: chunk.Headers(), Data: chunk.Data()})
	require.NoError(t, err)

	waitFor(t, "the index has the call", func() bool { _, ok := u.UI.index.Get(r.CallId); return ok })
	res, body := u.signIn(t, readerKey).get("/ui/calls/" + r.CallId)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, 1, strings.Count(body, `data-testid="partial">only chunk</span>`), "shown once")
}
