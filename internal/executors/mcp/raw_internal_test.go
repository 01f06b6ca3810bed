package mcp

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/require"
)

// A response body is captured whatever its line ends and however its
// reads split it: events of several data lines, CR LF split between
// reads, comments and other fields; a message over maxCaptured is not
// captured, and the body reads through unchanged.
func TestCaptureBodyParsesEventStreams(t *testing.T) {
	t.Parallel()
	var got []string
	c := newRawCapture(func(json.RawMessage) {}, func(token string, raw json.RawMessage) { got = append(got, token+" "+string(raw)) })
	for i, tok := range []string{"a", "b", "c"} {
		id, err := jsonrpc.MakeID(float64(i + 1))
		require.NoError(t, err)
		c.sent(&jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"x","_meta":{"progressToken":"` + tok + `"}}`)})
	}
	body := ": a comment\r\nevent: message\r\nid: 7\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata: \"result\":{\"n\":1}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"n\":2}}\n\n" +
		"data:{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"n\":3}}\r\r"
	for _, r := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader} {
		got = nil
		b := &captureBody{ReadCloser: io.NopCloser(r(strings.NewReader(body))), capture: &rawCapture{onCall: c.onCall, pending: clonePending(c)}, sse: true}
		read, err := io.ReadAll(b)
		require.NoError(t, err)
		require.Equal(t, body, string(read))
		require.Equal(t, []string{`a {"n":1}`, `b {"n":2}`, `c {"n":3}`}, got)
	}

	// A JSON body, captured at its end; an unknown id is not.
	got = nil
	b := &captureBody{ReadCloser: io.NopCloser(iotest.OneByteReader(strings.NewReader(`{"jsonrpc":"2.0","id":2,"result":{"ok":true}}`))),
		capture: &rawCapture{onCall: c.onCall, pending: clonePending(c)}}
	_, err := io.ReadAll(b)
	require.NoError(t, err)
	require.Equal(t, []string{`b {"ok":true}`}, got)
}

func clonePending(c *rawCapture) map[jsonrpc.ID]string {
	m := map[jsonrpc.ID]string{}
	for k, v := range c.pending {
		m[k] = v
	}
	return m
}

// A call that returns without its result leaves nothing behind.
func TestCaptureForgets(t *testing.T) {
	t.Parallel()
	c := newRawCapture(func(json.RawMessage) {}, func(string, json.RawMessage) {})
	id, err := jsonrpc.MakeID("r1")
	require.NoError(t, err)
	c.sent(&jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"_meta":{"progressToken":"t1"}}`)})
	c.sent(&jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"no token"}`)})
	require.Len(t, c.pending, 1)
	c.forget("t1")
	require.Empty(t, c.pending)
	require.Empty(t, c.byToken)
}
