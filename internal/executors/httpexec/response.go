package httpexec

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const (
	none     = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
	possible = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE
	unknown  = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
)

// sent is what a failed request that reached the server may have changed:
// nothing for safe methods, possibly something for the others.
func (p *plan) sent() toolwirev1.PartialSideEffects {
	if p.safe {
		return none
	}
	return possible
}

func deniedError(err error) *tool.Error {
	msg := err.Error()
	if !errors.Is(err, errDenied) {
		msg = errDenied.Error() + ": " + msg
	}
	return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, Message: msg,
		SideEffects: none, Cause: err,
		Suggestion: "the tool's allow_hosts, allow_ports and allow_networks decide which addresses it may reach"}
}

// requestError maps a failure of client.Do: no response was received.
func (e *Executor) requestError(ctx context.Context, p *plan, err error) *tool.Error {
	if te := ctxError(ctx, err); te != nil {
		return te
	}
	var de *dialError
	dialed := !errors.As(err, &de)
	switch {
	case isGuardError(err):
		return deniedError(err)
	case errors.Is(err, errTooManyRedirects):
		return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: err.Error(),
			SideEffects: p.sent(), Cause: err}
	}
	var cve *tls.CertificateVerificationError
	if errors.As(err, &cve) {
		return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: err.Error(), SideEffects: none, Cause: err}
	}
	se := p.sent()
	if !dialed {
		se = none // refused or unreachable before anything was sent
	}
	return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Message: err.Error(),
		Retryable: true, SideEffects: se, Cause: err}
}

// ctxError maps the end of ctx (the caller's cancel or deadline, or the
// executor's timeout), or returns nil if ctx is still live. A request cut
// off after it may have reached the server reports unknown side effects
// whatever its method (the server's work was interrupted, not refused);
// one cut off while connecting reports none.
func ctxError(ctx context.Context, err error) *tool.Error {
	if ctx.Err() == nil {
		return nil
	}
	se := unknown
	var de *dialError
	if errors.As(err, &de) {
		se = none
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, errExecutorTimeout) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, Message: "the HTTP request ran out of time: " + cause.Error(),
			Retryable: true, SideEffects: se, Cause: errors.Join(err, cause)}
	}
	te := tool.AsError(ctx, ctx.Err())
	te.SideEffects = se
	te.Cause = errors.Join(err, cause)
	return te
}

// maxErrorBody caps what an error status shows of its body.
const maxErrorBody = 64 << 10

// maxErrorSnippet is how much of an error body its message quotes.
const maxErrorSnippet = 512

// response maps a response to a result or an error.
func (e *Executor) response(ctx context.Context, p *plan, resp *http.Response, red *redactor) (*tool.Result, error) {
	limit := cmpOr(p.maxBytes, e.cfg.MaxResponseBytes)
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if !ok {
		limit = min(limit, maxErrorBody)
	}
	body, truncated, err := readBody(resp, limit)
	if err != nil {
		if te := ctxError(ctx, err); te != nil {
			return nil, te
		}
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Retryable: true,
			Message: fmt.Sprintf("HTTP %d: reading the body: %v", resp.StatusCode, err), SideEffects: p.sent(), Cause: err}
	}
	mediaType := contentType(resp, body)
	if !ok {
		return nil, e.statusError(p, resp, red.redact(body), truncated, mediaType)
	}
	return e.result(p, resp, body, truncated, mediaType, red)
}

func cmpOr(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}

// readBody reads at most limit bytes of the (decompressed) body; it
// reports whether more were there.
func readBody(resp *http.Response, limit int64) ([]byte, bool, error) {
	var b bytes.Buffer
	if n := resp.ContentLength; n > 0 && n <= limit {
		b.Grow(int(n) + 1)
	}
	_, err := b.ReadFrom(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(b.Len()) > limit {
		return b.Bytes()[:limit], true, nil
	}
	return b.Bytes(), false, nil
}

// contentType returns the response's media type, sniffed when absent.
func contentType(resp *http.Response, body []byte) string {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = http.DetectContentType(body)
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "application/octet-stream"
	}
	return mt
}

func isJSON(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func isText(mt string) bool {
	return strings.HasPrefix(mt, "text/") || isJSON(mt) || mt == "application/xml" ||
		strings.HasSuffix(mt, "+xml") || mt == "application/javascript" || mt == "application/x-www-form-urlencoded"
}

// truncatedText cuts body at a rune boundary and appends the marker.
func truncatedText(body []byte, limit int64) string {
	for len(body) > 0 && !utf8.Valid(body[max(0, len(body)-utf8.UTFMax):]) {
		body = body[:len(body)-1]
	}
	return string(body) + fmt.Sprintf("\n[truncated: the response exceeded max_response_bytes (%d bytes)]", limit)
}

// result maps a 2xx response.
func (e *Executor) result(p *plan, resp *http.Response, body []byte, truncated bool, mt string, red *redactor) (*tool.Result, error) {
	limit := cmpOr(p.maxBytes, e.cfg.MaxResponseBytes)
	bad := func(msg string) error {
		return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
			Message: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, msg), SideEffects: p.sent(),
			Suggestion: "the request was sent and answered; retrying may repeat its effects"}
	}
	res := &tool.Result{}
	var intents []*toolwirev1.Intent
	if p.intentsHeader != "" {
		if h := resp.Header.Get(p.intentsHeader); h != "" {
			in, err := parseIntents([]byte(red.redactString(h)))
			if err != nil {
				return nil, bad(fmt.Sprintf("header %s: %v", p.intentsHeader, err))
			}
			intents = in
		}
	}

	switch {
	case len(body) == 0 && !truncated:
		res.Content = append(res.Content, tool.Text(fmt.Sprintf("HTTP %d: empty response body", resp.StatusCode)))
	case strings.HasPrefix(mt, "image/") || strings.HasPrefix(mt, "audio/"):
		if truncated {
			return nil, bad(fmt.Sprintf("the %s body exceeds max_response_bytes (%d bytes)", mt, limit))
		}
		if strings.HasPrefix(mt, "image/") {
			res.Content = append(res.Content, tool.Image(body, mt))
		} else {
			res.Content = append(res.Content, &toolwirev1.Content{Kind: &toolwirev1.Content_Audio{
				Audio: &toolwirev1.AudioContent{Data: body, MimeType: mt}}})
		}
	case truncated:
		if p.intentsField != "" {
			return nil, bad(fmt.Sprintf("the body exceeds max_response_bytes (%d bytes), so its intents cannot be read", limit))
		}
		if !isText(mt) && !utf8.Valid(body[:max(0, len(body)-utf8.UTFMax)]) {
			return nil, bad(fmt.Sprintf("the %s body exceeds max_response_bytes (%d bytes)", mt, limit))
		}
		res.Content = append(res.Content, tool.Text(truncatedText(red.redact(body), limit)))
	case isJSON(mt) && json.Valid(body):
		if body = red.redact(body); !json.Valid(body) {
			res.Content = append(res.Content, tool.Text(string(body)))
			break
		}
		if body[firstNonSpace(body)] == '{' {
			if p.intentsField != "" {
				var in []*toolwirev1.Intent
				var err error
				body, in, err = takeField(body, p.intentsField)
				if err != nil {
					return nil, bad(fmt.Sprintf("field %q: %v", p.intentsField, err))
				}
				intents = append(in, intents...)
			}
			res.Structured = body
		}
		res.Content = append(res.Content, tool.Text(string(body)))
	case isText(mt) || utf8.Valid(body):
		res.Content = append(res.Content, tool.Text(string(red.redact(body))))
	default:
		res.Content = append(res.Content, &toolwirev1.Content{Kind: &toolwirev1.Content_Resource{
			Resource: &toolwirev1.EmbeddedResource{Uri: redactURL(resp.Request.URL), MimeType: mt,
				Contents: &toolwirev1.EmbeddedResource_Blob{Blob: body}}}})
	}
	for i, in := range intents {
		in.Id = "i" + strconv.Itoa(i+1)
	}
	res.Intents = intents
	return res, nil
}

func firstNonSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return i
		}
	}
	return 0
}

// takeField removes the top-level member name from a JSON object, keeping
// the others in order, and parses it as intents.
func takeField(obj []byte, name string) ([]byte, []*toolwirev1.Intent, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	out.Grow(len(obj))
	out.WriteByte('{')
	var intents []*toolwirev1.Intent
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		if key == name {
			if string(v) != "null" {
				if intents, err = parseIntents(v); err != nil {
					return nil, nil, err
				}
			}
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(key) // a string always encodes
		out.Write(k)
		out.WriteByte(':')
		out.Write(v)
	}
	out.WriteByte('}')
	return out.Bytes(), intents, nil
}

// parseIntents reads [{"type": "...", "payload": ...}, ...].
func parseIntents(b []byte) ([]*toolwirev1.Intent, error) {
	var list []struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("want a JSON array of {\"type\": ..., \"payload\": ...}: %w", err)
	}
	intents := make([]*toolwirev1.Intent, 0, len(list))
	for i, it := range list {
		if it.Type == "" {
			return nil, fmt.Errorf("intent %d has no type", i+1)
		}
		in := &toolwirev1.Intent{Type: it.Type}
		if len(it.Payload) > 0 && string(it.Payload) != "null" {
			var c bytes.Buffer
			if err := json.Compact(&c, it.Payload); err != nil {
				return nil, fmt.Errorf("intent %d: %w", i+1, err)
			}
			in.PayloadJson = c.String()
		}
		intents = append(intents, in)
	}
	return intents, nil
}

// statusError maps a non-2xx status (see doc.go for the table).
func (e *Executor) statusError(p *plan, resp *http.Response, body []byte, truncated bool, mt string) *tool.Error {
	code := resp.StatusCode
	te := &tool.Error{SideEffects: none}
	switch {
	case code == http.StatusTooManyRequests:
		te.Type, te.Retryable = toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, true
		te.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		te.Type = toolwirev1.ErrorType_ERROR_TYPE_AUTH
	case code == http.StatusNotFound || code == http.StatusGone:
		te.Type = toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND
	case code == http.StatusConflict:
		te.Type = toolwirev1.ErrorType_ERROR_TYPE_CONFLICT
	case code == http.StatusBadRequest || code == http.StatusUnprocessableEntity:
		te.Type = toolwirev1.ErrorType_ERROR_TYPE_VALIDATION
	case code == http.StatusRequestTimeout:
		te.Type, te.Retryable = toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, true
	case code == http.StatusNotImplemented || code == http.StatusHTTPVersionNotSupported:
		te.Type, te.SideEffects = toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, p.sent()
	case code >= 500:
		te.Type, te.Retryable, te.SideEffects = toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, true, p.sent()
		te.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	case code >= 300 && code < 400:
		te.Type, te.SideEffects = toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, p.sent()
	default:
		te.Type = toolwirev1.ErrorType_ERROR_TYPE_PERMANENT
	}
	te.Message = fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
	if len(body) > 0 && (isText(mt) || utf8.Valid(body)) {
		snippet := body
		if len(snippet) > maxErrorSnippet {
			snippet = append(snippet[:maxErrorSnippet:maxErrorSnippet], "…"...)
		}
		te.Message += ": " + strings.TrimSpace(strings.ToValidUTF8(string(snippet), ""))
		text := string(body)
		if truncated {
			text = truncatedText(body, maxErrorBody)
		}
		te.Content = []*toolwirev1.Content{tool.Text(text)}
		if isJSON(mt) && !truncated && json.Valid(body) && body[firstNonSpace(body)] == '{' {
			te.Structured = body
		}
	}
	return te
}

// retryAfter parses Retry-After: delay-seconds or an HTTP-date; zero if
// absent, invalid or past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(365*24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
