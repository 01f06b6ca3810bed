package httpexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// plan is an HttpConfig checked and parsed once.
type plan struct {
	method   string
	safe     bool // GET, HEAD, OPTIONS: no side effects
	url      *urlTemplate
	query    []string
	consumed map[string]bool // arguments used by the URL and query
	body     *bodyTemplate
	argsBody bool // send the unconsumed arguments as the JSON body
	headers  [][2]string
	secrets  []secretRef
	maxBytes int64 // 0: the executor's default
	hosts    hostList
	pol      *policy
	// intentsField and intentsHeader locate intents in the response.
	intentsField  string
	intentsHeader string
}

var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions}

// reservedHeaders are set by the executor or the transport and may not
// be configured.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection",
	"Idempotency-Key", "Te", "Trailer", "Upgrade", "Proxy-Authorization", "Proxy-Connection", "Keep-Alive"}

// compile checks an HttpConfig and parses its templates. cfg supplies the
// executor-wide ports and networks.
func compile(hc *toolwirev1.HttpConfig, cfg *Config) (*plan, error) {
	if hc == nil {
		return nil, errors.New("the spec has no http config")
	}
	p := &plan{method: hc.GetMethod(), intentsField: hc.GetIntentsField()}
	if p.method == "" {
		p.method = http.MethodGet
	}
	if !slices.Contains(methods, p.method) {
		return nil, fmt.Errorf("method %q: want one of %s (upper case)", hc.GetMethod(), strings.Join(methods, ", "))
	}
	p.safe = p.method == http.MethodGet || p.method == http.MethodHead || p.method == http.MethodOptions

	var err error
	if p.url, err = parseURLTemplate(hc.GetUrlTemplate()); err != nil {
		return nil, err
	}
	p.consumed = map[string]bool{}
	for _, v := range p.url.vars() {
		p.consumed[v] = true
	}
	for _, q := range hc.GetQueryArgs() {
		if q == "" {
			return nil, errors.New("query_args: empty name")
		}
		if p.consumed[q] {
			return nil, fmt.Errorf("query_args: %q is already used by url_template or listed twice", q)
		}
		p.consumed[q] = true
		p.query = append(p.query, q)
	}

	if t := hc.GetBodyTemplate(); t != "" {
		if p.method == http.MethodGet || p.method == http.MethodHead {
			return nil, fmt.Errorf("body_template: a %s request has no body", p.method)
		}
		if p.body, err = parseBodyTemplate(t); err != nil {
			return nil, err
		}
	} else {
		p.argsBody = p.method == http.MethodPost || p.method == http.MethodPut || p.method == http.MethodPatch
	}

	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(hc.GetHeaders())) {
		value := hc.GetHeaders()[name]
		c, err := checkHeader(name, seen)
		if err != nil {
			return nil, fmt.Errorf("headers: %w", err)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, fmt.Errorf("headers: %s: the value has line breaks or NUL", name)
		}
		p.headers = append(p.headers, [2]string{c, value})
	}
	for _, name := range slices.Sorted(maps.Keys(hc.GetSecretHeaders())) {
		c, err := checkHeader(name, seen)
		if err != nil {
			return nil, fmt.Errorf("secret_headers: %w", err)
		}
		if err := checkSecretRef(hc.GetSecretHeaders()[name]); err != nil {
			return nil, fmt.Errorf("secret_headers: %s: %w", name, err)
		}
		p.secrets = append(p.secrets, secretRef{header: c, ref: hc.GetSecretHeaders()[name]})
	}

	if p.maxBytes = hc.GetMaxResponseBytes(); p.maxBytes < 0 {
		return nil, fmt.Errorf("max_response_bytes %d: must not be negative", p.maxBytes)
	}
	if p.hosts, err = parseHosts(hc.GetAllowHosts(), p.url.base.Hostname()); err != nil {
		return nil, err
	}
	if p.pol, err = newPolicy(hc.GetAllowPorts(), hc.GetAllowNetworks(), cfg); err != nil {
		return nil, err
	}
	if h := hc.GetIntentsHeader(); h != "" {
		if !validToken(h) {
			return nil, fmt.Errorf("intents_header: %q is not a header name", h)
		}
		p.intentsHeader = http.CanonicalHeaderKey(h)
	}
	return p, nil
}

func checkHeader(name string, seen map[string]bool) (string, error) {
	if !validToken(name) {
		return "", fmt.Errorf("%q is not a header name", name)
	}
	c := http.CanonicalHeaderKey(name)
	if slices.Contains(reservedHeaders, c) {
		return "", fmt.Errorf("%s is set by the executor", c)
	}
	if seen[c] {
		return "", fmt.Errorf("%s is set twice (names are case-insensitive; headers and secret_headers share them)", c)
	}
	seen[c] = true
	return c, nil
}

// validToken reports whether s is an HTTP token (RFC 9110 §5.6.2).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// CheckSpec validates an http tool's spec at start-up, without executor
// settings: the method, the URL template (simple {name} expansion only,
// expressions after the host, no user information, a scheme of http or
// https), the body template, header names and values, the form of the
// secret references (not whether they resolve), the allowlists, and that
// every template variable, query argument and body-template placeholder
// is a property of the input schema. It returns the first problem found.
//
// Executor.CheckSpec adds the checks that depend on the executor's
// Config: the template's host and port pass the allowlists and the guard.
func CheckSpec(spec *toolwirev1.ToolSpec) error {
	_, err := checkSpec(spec, &Config{})
	return err
}

func checkSpec(spec *toolwirev1.ToolSpec, cfg *Config) (*plan, error) {
	if e := spec.GetExecutor(); e != toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP && e != toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED {
		return nil, fmt.Errorf("httpexec: tool %q: executor %s is not http", spec.GetName(), e)
	}
	p, err := compile(spec.GetHttp(), cfg)
	if err != nil {
		return nil, fmt.Errorf("httpexec: tool %q: %w", spec.GetName(), err)
	}
	if p.url.base.User != nil {
		return nil, fmt.Errorf("httpexec: tool %q: url_template: user information (user@host) is refused; send credentials with secret_headers", spec.GetName())
	}
	props, err := schemaProperties(spec.GetInputSchemaJson())
	if err != nil {
		return nil, fmt.Errorf("httpexec: tool %q: input schema: %w", spec.GetName(), err)
	}
	check := func(where string, names []string) error {
		for _, n := range names {
			if !props[n] {
				return fmt.Errorf("httpexec: tool %q: %s refers to %q, which is not a property of the input schema", spec.GetName(), where, n)
			}
		}
		return nil
	}
	if err := check("url_template", p.url.vars()); err != nil {
		return nil, err
	}
	if err := check("query_args", p.query); err != nil {
		return nil, err
	}
	if p.body != nil {
		if err := check("body_template", p.body.vars()); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// schemaProperties returns the names under the schema's top-level
// "properties" (an empty schema has none).
func schemaProperties(schema string) (map[string]bool, error) {
	if strings.TrimSpace(schema) == "" {
		return map[string]bool{}, nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		return nil, err
	}
	props := make(map[string]bool, len(s.Properties))
	for k := range s.Properties {
		props[k] = true
	}
	return props, nil
}
