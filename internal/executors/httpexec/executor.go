package httpexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/internal/egress"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The worker's owner closes an Executor through executors.Closer.
var _ executors.Closer = (*Executor)(nil)

// Executor runs http tools. It is safe for concurrent use.
type Executor struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	transports map[string]*http.Transport // by policy key
	plans      map[string]*plan           // by spec name and version
}

var _ executors.Executor = (*Executor)(nil)

// maxCached bounds the transports and plans kept; past it the caches are
// emptied (idle connections closed) and refilled on demand.
const maxCached = 1024

// New returns an Executor for cfg (defaults filled in). It returns the
// error of cfg.Validate.
func New(cfg Config) (*Executor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	return &Executor{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "executor", "executor", "http"),
		transports: map[string]*http.Transport{},
		plans:      map[string]*plan{},
	}, nil
}

// CheckSpec is the package's CheckSpec plus the checks that need e's
// Config: the url_template's host and port pass the allowlists and, when
// the host is an IP address, the SSRF guard.
func (e *Executor) CheckSpec(spec *toolwirev1.ToolSpec) error {
	p, err := checkSpec(spec, &e.cfg)
	if err != nil {
		return err
	}
	if err := checkTarget(p.url.base, p.hosts, p.pol, p.pol.guard); err != nil {
		return fmt.Errorf("httpexec: tool %q: url_template: %w", spec.GetName(), err)
	}
	return nil
}

// Close closes the idle connections of every transport (executors.Closer;
// it does not wait, so it always returns nil). Requests under way are not
// interrupted (their contexts do that); the Executor remains usable.
func (e *Executor) Close(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range e.transports {
		t.CloseIdleConnections()
	}
	clear(e.transports)
	return nil
}

// plan returns the compiled HttpConfig of spec, cached by name and version
// when the registry set a version (a content hash).
func (e *Executor) plan(spec *toolwirev1.ToolSpec) (*plan, error) {
	key := ""
	if v := spec.GetVersion(); v != "" {
		key = spec.GetName() + "@" + v
		e.mu.Lock()
		p := e.plans[key]
		e.mu.Unlock()
		if p != nil {
			return p, nil
		}
	}
	p, err := compile(spec.GetHttp(), &e.cfg)
	if err != nil || key == "" {
		return p, err
	}
	e.mu.Lock()
	if len(e.plans) >= maxCached {
		clear(e.plans)
	}
	e.plans[key] = p
	e.mu.Unlock()
	return p, nil
}

// transport returns the shared transport of a policy.
func (e *Executor) transport(p *policy) *http.Transport {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t := e.transports[p.key]; t != nil {
		return t
	}
	if len(e.transports) >= maxCached {
		for _, t := range e.transports {
			t.CloseIdleConnections()
		}
		clear(e.transports)
	}
	t := &http.Transport{
		Proxy:                  nil, // a proxy would dial for us, past the guard
		DialContext:            p.dialFunc(e.cfg.Resolver, time.Duration(e.cfg.DialTimeout)),
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           4 * e.cfg.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:    e.cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    time.Duration(e.cfg.DialTimeout),
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	e.transports[p.key] = t
	return t
}

// errExecutorTimeout is the cause of the executor's own deadline.
var errExecutorTimeout = errors.New("httpexec: the request exceeded the executor's timeout")

// Execute sends the request req's tool describes and maps the response.
//
// It returns, as *tool.Error: INTERNAL for a spec that does not compile or
// a secret that does not resolve; VALIDATION for arguments that cannot
// fill the templates; PERMISSION_DENIED when the SSRF guard or an
// allowlist refuses the URL, a redirect or a resolved address; TRANSIENT
// for connection failures and 5xx; TIMEOUT and CANCELLED when the context
// ends; RATE_LIMIT, AUTH, NOT_FOUND, CONFLICT, VALIDATION and PERMANENT
// for the other statuses (see doc.go). Errors raised before anything was
// sent report no side effects.
func (e *Executor) Execute(ctx context.Context, req *executors.Request) (*tool.Result, error) {
	p, err := e.plan(req.Spec)
	if err != nil {
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
			Message:     fmt.Sprintf("http tool %q: invalid spec: %v", req.Spec.GetName(), err),
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, Cause: err}
	}
	a, err := parseArgs(req.Call.GetArguments())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, time.Duration(e.cfg.Timeout), errExecutorTimeout)
	defer cancel()
	// The values of secret arguments (nil for a tool without any): the
	// body redactor removes them too, and net/http's errors quote the URL.
	sec := redact.ForSpec(req.Spec).Secrets(req.Call.GetArguments())
	hreq, red, err := e.newRequest(ctx, p, a, req.Call.GetCallId(), sec)
	if err != nil {
		return nil, err
	}

	g := p.pol.guard
	if err := checkTarget(hreq.URL, p.hosts, p.pol, g); err != nil {
		return nil, deniedError(err)
	}
	client := &http.Client{
		Transport:     e.transport(p.pol),
		CheckRedirect: e.checkRedirect(p, g),
	}
	start := time.Now()
	resp, err := client.Do(hreq)
	if err != nil {
		// net/http's errors quote the URL, arguments included: the values
		// of secret arguments are redacted from the log line and the error
		// (as the worker redacts every result and error; internal/redact).
		e.log.DebugContext(ctx, "http tool request failed", "tool", req.Spec.GetName(), "call_id", req.Call.GetCallId(),
			"method", p.method, "host", hreq.URL.Host, "error", sec.Err(err), "duration", time.Since(start))
		return nil, sec.Err(e.requestError(ctx, p, err))
	}
	defer resp.Body.Close()
	res, err := e.response(ctx, p, resp, red)
	e.log.DebugContext(ctx, "http tool request", "tool", req.Spec.GetName(), "call_id", req.Call.GetCallId(),
		"method", p.method, "host", hreq.URL.Host, "status", resp.StatusCode, "duration", time.Since(start))
	return res, err
}

// newRequest fills the templates and headers.
func (e *Executor) newRequest(ctx context.Context, p *plan, a *args, callID string, sec *redact.Secrets) (*http.Request, *redactor, error) {
	rawURL, err := p.url.expand(a)
	if err != nil {
		return nil, nil, err
	}
	if len(p.query) > 0 {
		var q strings.Builder
		for _, name := range p.query {
			v, ok := a.get(name)
			if !ok {
				continue
			}
			if err := appendQuery(&q, name, v); err != nil {
				return nil, nil, err
			}
		}
		if q.Len() > 0 {
			switch {
			case !strings.Contains(rawURL, "?"):
				rawURL += "?"
			case !strings.HasSuffix(rawURL, "?") && !strings.HasSuffix(rawURL, "&"):
				rawURL += "&"
			}
			rawURL += q.String()
		}
	}
	var body []byte
	switch {
	case p.body != nil:
		if body, err = p.body.render(a); err != nil {
			return nil, nil, err
		}
	case p.argsBody:
		body = a.body(p.consumed)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, p.method, rawURL, rd)
	if err != nil { // cannot happen: every argument byte is escaped
		return nil, nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: "the expanded URL does not parse",
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, Cause: err}
	}
	if body != nil {
		hreq.Header["Content-Type"] = []string{"application/json"}
	}
	hreq.Header["User-Agent"] = []string{e.cfg.UserAgent}
	hreq.Header["Accept"] = []string{"application/json, text/*;q=0.9, */*;q=0.8"}
	for _, h := range p.headers {
		hreq.Header[h[0]] = []string{h[1]}
	}
	if !p.safe && callID != "" {
		hreq.Header["Idempotency-Key"] = []string{callID}
	}
	values := make([]string, 0, len(p.secrets))
	for _, s := range p.secrets {
		v, err := resolveSecret(s.ref)
		if err != nil {
			return nil, nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
				Message:     fmt.Sprintf("header %s: %v", s.header, err),
				SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, Cause: err}
		}
		hreq.Header[s.header] = []string{v}
		values = append(values, v)
	}
	return hreq, newRedactor(values, sec), nil
}

// appendQuery adds name=value pairs: a scalar once, an array's scalars
// once each; null elements are skipped.
func appendQuery(q *strings.Builder, name string, v []byte) error {
	add := func(s string) {
		if q.Len() > 0 {
			q.WriteByte('&')
		}
		q.WriteString(url.QueryEscape(name))
		q.WriteByte('=')
		q.WriteString(url.QueryEscape(s))
	}
	if v[0] != '[' {
		s, err := scalarText(name, v)
		if err != nil {
			return err
		}
		add(s)
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return argError(name, "not a valid JSON array")
	}
	for _, it := range items {
		if string(it) == "null" {
			continue
		}
		s, err := scalarText(name, it)
		if err != nil {
			return argError(name, "query arrays hold strings, numbers or booleans only")
		}
		add(s)
	}
	return nil
}

// checkRedirect bounds and re-checks redirects. Secret headers are
// dropped when a redirect leaves the original scheme, host and port, and
// Referer is never sent: net/http sets it on a redirect to the URL that
// redirected, query (arguments) included.
func (e *Executor) checkRedirect(p *plan, g *egress.Guard) func(*http.Request, []*http.Request) error {
	return func(next *http.Request, via []*http.Request) error {
		next.Header.Del("Referer")
		if e.cfg.MaxRedirects < 0 {
			return http.ErrUseLastResponse
		}
		if len(via) > e.cfg.MaxRedirects {
			return fmt.Errorf("%w after %d redirects", errTooManyRedirects, e.cfg.MaxRedirects)
		}
		if err := checkTarget(next.URL, p.hosts, p.pol, g); err != nil {
			return fmt.Errorf("redirect to %s: %w", redactURL(next.URL), err)
		}
		first := via[0].URL
		if next.URL.Scheme != first.Scheme || next.URL.Host != first.Host {
			for _, s := range p.secrets {
				next.Header.Del(s.header)
			}
		}
		return nil
	}
}

var errTooManyRedirects = errors.New("too many redirects")

// redactURL drops user information and the query from a URL for messages.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.Fragment = ""
	return c.String()
}
