package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK (v1.8.0) decodes results into types that lose two things
// toolwire keeps: a tool's `execution` (tools/list) and an annotation's
// `priority: 0` (tools/call: its float64 with omitempty cannot tell 0 from
// absent). A rawCapture sees the JSON-RPC messages of one connection as
// they pass — a wrapped Connection for stdio servers, the HTTP round
// trips for streamable HTTP servers (a wrapped Connection would hide the
// SDK's own optional interfaces of its HTTP connection) — and hands the
// raw result of each tools/list and tools/call to the executor before the
// SDK returns it to the caller.

// maxCaptured bounds one captured message; a larger one is not captured
// (its tool's execution or its zero priorities are then unknown, as with
// the SDK alone).
const maxCaptured = 32 << 20

// listKey marks a pending tools/list request.
const listKey = "\x00tools/list"

// rawCapture routes the raw results of one connection's tools/list and
// tools/call requests (by their JSON-RPC id) to onList and onCall.
type rawCapture struct {
	onList func(raw json.RawMessage)
	onCall func(token string, raw json.RawMessage)

	mu      sync.Mutex
	pending map[jsonrpc.ID]string // request id -> progress token, or listKey
	byToken map[string]jsonrpc.ID
}

func newRawCapture(onList func(json.RawMessage), onCall func(string, json.RawMessage)) *rawCapture {
	return &rawCapture{onList: onList, onCall: onCall, pending: map[jsonrpc.ID]string{}, byToken: map[string]jsonrpc.ID{}}
}

// sent records a request whose result is wanted.
func (c *rawCapture) sent(msg jsonrpc.Message) {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.sentCall(req.ID, req.Method, req.Params)
	}
}

// sentCall records the request id, of method with params, whose result
// is wanted.
func (c *rawCapture) sentCall(id jsonrpc.ID, method string, params json.RawMessage) {
	if c == nil {
		return
	}
	var key string
	switch method {
	case "tools/list":
		key = listKey
	case "tools/call":
		var p struct {
			Meta struct {
				ProgressToken any `json:"progressToken"`
			} `json:"_meta"`
		}
		if json.Unmarshal(params, &p) != nil {
			return
		}
		tok, ok := p.Meta.ProgressToken.(string)
		if !ok || tok == "" {
			return
		}
		key = tok
	default:
		return
	}
	c.mu.Lock()
	c.pending[id] = key
	if key != listKey {
		c.byToken[key] = id
	}
	c.mu.Unlock()
}

// received hands the result of a recorded request on.
func (c *rawCapture) received(msg jsonrpc.Message) {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.receivedResult(resp.ID, resp.Result, resp.Error != nil)
	}
}

// receivedResult hands the result of request id on (nothing for a
// failed request).
func (c *rawCapture) receivedResult(id jsonrpc.ID, result json.RawMessage, failed bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	key, ok := c.pending[id]
	delete(c.pending, id)
	if ok && key != listKey {
		delete(c.byToken, key)
	}
	c.mu.Unlock()
	if !ok || failed || len(result) == 0 {
		return
	}
	if key == listKey {
		c.onList(result)
	} else {
		c.onCall(key, result)
	}
}

// waiting reports whether any request awaits its result.
func (c *rawCapture) waiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) > 0
}

// envelope is what a capture reads of a JSON-RPC message on HTTP: with
// encoding/json into these few fields (the SDK's decoder costs tens of
// KiB per message).
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// decodeEnvelope reads a JSON-RPC message (not a batch) and its id.
func decodeEnvelope(data []byte) (envelope, jsonrpc.ID, bool) {
	var env envelope
	if json.Unmarshal(data, &env) != nil || len(env.ID) == 0 {
		return env, jsonrpc.ID{}, false
	}
	var raw any
	if json.Unmarshal(env.ID, &raw) != nil {
		return env, jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(raw)
	return env, id, err == nil && id.IsValid()
}

// forget drops the request of a call that returned without its result
// (cancelled: a server need not answer it).
func (c *rawCapture) forget(token string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if id, ok := c.byToken[token]; ok {
		delete(c.pending, id)
		delete(c.byToken, token)
	}
	c.mu.Unlock()
}

// captureTransport wraps a stdio transport's connection.
type captureTransport struct {
	sdk.Transport
	capture *rawCapture
}

func (t captureTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &captureConn{Connection: conn, capture: t.capture}, nil
}

type captureConn struct {
	sdk.Connection
	capture *rawCapture
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		c.capture.received(msg)
	}
	return msg, err
}

func (c *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.capture.sent(msg)
	return c.Connection.Write(ctx, msg)
}

// captureRoundTrip records the JSON-RPC request of an HTTP request and
// wraps the response's body so that the messages in it (a JSON body or
// server-sent events) are captured as the SDK reads them.
func captureRoundTrip(c *rawCapture, base http.RoundTripper, req *http.Request) (*http.Response, error) {
	if c != nil && req.Method == http.MethodPost && req.Body != nil && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			data, err := io.ReadAll(io.LimitReader(body, maxCaptured+1))
			_ = body.Close()
			if err == nil && len(data) <= maxCaptured && bytes.Contains(data, []byte(`"tools/`)) {
				if env, id, ok := decodeEnvelope(data); ok && env.Method != "" {
					c.sentCall(id, env.Method, env.Params)
				}
			}
		}
	}
	resp, err := base.RoundTrip(req)
	if err != nil || c == nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &captureBody{ReadCloser: resp.Body, capture: c}
	case "text/event-stream":
		resp.Body = &captureBody{ReadCloser: resp.Body, capture: c, sse: true}
	}
	return resp, nil
}

// captureBody captures the messages of an HTTP response body as it is
// read: the whole body (JSON) or each event's data (SSE), parsed when it
// is complete, before the bytes that complete it are returned.
type captureBody struct {
	io.ReadCloser
	capture *rawCapture
	sse     bool

	line []byte // SSE: the current line so far
	data []byte // the JSON body, or the current event's data
	over bool   // the current message passed maxCaptured
	cr   bool   // SSE: the last read ended with a CR
	done bool
}

func (b *captureBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.done {
		if b.sse {
			b.feedSSE(p[:n])
		} else {
			b.add(p[:n])
		}
	}
	if err != nil && !b.done {
		b.done = true
		if err == io.EOF {
			b.flush()
		}
	}
	return n, err
}

func (b *captureBody) add(p []byte) {
	if b.over || len(b.data)+len(p) > maxCaptured {
		b.over, b.data = true, nil
		return
	}
	b.data = append(b.data, p...)
}

// feedSSE parses event-stream lines (text/event-stream: LF, CRLF or CR
// line ends; "data:" fields joined by LF; a blank line ends an event).
func (b *captureBody) feedSSE(p []byte) {
	if b.cr && len(p) > 0 && p[0] == '\n' {
		p = p[1:] // the LF of a CR LF split between reads
	}
	b.cr = false
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			b.addLine(p)
			return
		}
		b.addLine(p[:i])
		b.endLine()
		term := p[i]
		p = p[i+1:]
		if term == '\r' {
			if len(p) == 0 {
				b.cr = true
			} else if p[0] == '\n' {
				p = p[1:]
			}
		}
	}
}

func (b *captureBody) addLine(p []byte) {
	if len(b.line)+len(p) > maxCaptured {
		b.over = true
		return
	}
	b.line = append(b.line, p...)
}

func (b *captureBody) endLine() {
	line := b.line
	b.line = b.line[:0]
	if len(line) == 0 {
		b.flush()
		return
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	if string(field) != "data" {
		return
	}
	value = bytes.TrimPrefix(value, []byte(" "))
	if b.data != nil {
		b.add([]byte("\n"))
	}
	b.add(value)
	if b.data == nil && !b.over {
		b.data = []byte{}
	}
}

// flush captures the message collected, if any.
func (b *captureBody) flush() {
	data, over := b.data, b.over
	b.data, b.over = nil, false
	if over || len(bytes.TrimSpace(data)) == 0 || !b.capture.waiting() {
		return
	}
	if env, id, ok := decodeEnvelope(data); ok && env.Method == "" {
		b.capture.receivedResult(id, env.Result, len(env.Error) > 0 && string(env.Error) != "null")
	}
}
