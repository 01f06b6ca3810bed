package httpexec_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/httpexec"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// TestURLTemplateEscaping: whatever a value holds, it stays inside its
// path segment (or query value), and the server decodes it back exactly.
func TestURLTemplateEscaping(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})
	spec := b.srv.spec("seg", http.MethodGet, "/record/{name}/tail?q={q}", []string{"name", "q"}, nil)
	require.NoError(t, b.exec.CheckSpec(spec))
	for _, tt := range []struct{ value, path string }{
		{"../", "..%2F"},
		{"../../etc/passwd", "..%2F..%2Fetc%2Fpasswd"},
		{"a/b", "a%2Fb"},
		{"a?b=c", "a%3Fb%3Dc"},
		{"a#frag", "a%23frag"},
		{"%2e%2e", "%252e%252e"},
		{"héllo wörld", "h%C3%A9llo%20w%C3%B6rld"},
		{"semi;colon&amp", "semi%3Bcolon%26amp"},
		{"~safe-chars_.", "~safe-chars_."},
		{"...", "..."},
	} {
		t.Run(tt.value, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"name": tt.value, "q": tt.value})
			_, err := call(t, b.exec, spec, string(args))
			require.NoError(t, err)
			got, _ := b.srv.lastRequest()
			require.Equal(t, "/record/"+tt.path+"/tail", got.URL.EscapedPath())
			require.Equal(t, "/record/"+tt.value+"/tail", got.URL.Path, "decoded, it is the value")
			q, err := url.ParseQuery(got.URL.RawQuery)
			require.NoError(t, err)
			require.Equal(t, []string{tt.value}, q["q"], "the query value is one value")
		})
	}

	t.Run("numbers and booleans as written", func(t *testing.T) {
		_, err := call(t, b.exec, spec, `{"name": 12.50, "q": true}`)
		require.NoError(t, err)
		got, _ := b.srv.lastRequest()
		require.Equal(t, "/record/12.50/tail", got.URL.EscapedPath())
		require.Equal(t, "q=true", got.URL.RawQuery)
	})

	for _, tt := range []struct{ name, args, field string }{
		{"missing path value", `{"q":"x"}`, "/name"},
		{"null path value", `{"name":null}`, "/name"},
		{"empty path segment", `{"name":""}`, "/name"},
		{"dot segment", `{"name":"."}`, "/name"},
		{"dot-dot segment", `{"name":".."}`, "/name"},
		{"object value", `{"name":{"a":1}}`, "/name"},
		{"array value", `{"name":[1]}`, "/name"},
		{"arguments not an object", `["name"]`, ""},
		{"arguments not JSON", `{name`, ""},
		{"trailing garbage", `{"name":"a"} x`, ""},
		{"two values", `{"name":"a"} {}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hits := b.srv.hits.Load()
			_, err := call(t, b.exec, spec, tt.args)
			te := toolErr(t, err)
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.Type, "%v", err)
			require.Equal(t, seNone, te.SideEffects)
			require.Equal(t, tt.field, te.Violations[0].GetField())
			require.Equal(t, hits, b.srv.hits.Load(), "nothing was sent")
		})
	}

	t.Run("a missing query value is empty", func(t *testing.T) {
		_, err := call(t, b.exec, spec, `{"name":"n"}`)
		require.NoError(t, err)
		got, _ := b.srv.lastRequest()
		require.Equal(t, "q=", got.URL.RawQuery)
	})
}

// TestQueryArgsAndBody: query_args are encoded as parameters (arrays
// repeat), and a POST sends the other arguments as a JSON object, in
// their order and bytes.
func TestQueryArgsAndBody(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})
	spec := b.srv.spec("post", http.MethodPost, "/record/{id}?fixed=1", []string{"id", "tags", "page", "doc", "n"},
		func(hc *toolwirev1.HttpConfig) { hc.QueryArgs = []string{"tags", "page"} })
	require.NoError(t, httpexec.CheckSpec(spec))
	_, err := call(t, b.exec, spec, `{"n": 1.0e2, "id":"a b", "tags":["x&y", 2, null, true], "doc": {"z": [1, 2], "a": "é"}, "page": null}`)
	require.NoError(t, err)
	got, body := b.srv.lastRequest()
	require.Equal(t, "/record/a%20b", got.URL.EscapedPath())
	require.Equal(t, "fixed=1&tags=x%26y&tags=2&tags=true", got.URL.RawQuery)
	require.Equal(t, `{"n":1.0e2,"doc":{"z": [1, 2], "a": "é"}}`, string(body))
	require.Equal(t, "application/json", got.Header.Get("Content-Type"))

	t.Run("nothing consumed: the exact arguments", func(t *testing.T) {
		args := `{ "b": 2,  "a": "\u00e9" }`
		_, err := call(t, b.exec, b.srv.spec("raw", http.MethodPut, "/record/raw", nil, nil), args)
		require.NoError(t, err)
		_, body := b.srv.lastRequest()
		require.Equal(t, args, string(body))
	})

	t.Run("a GET sends no body", func(t *testing.T) {
		_, err := call(t, b.exec, b.srv.spec("get", http.MethodGet, "/record/get", nil, nil), `{"a":1}`)
		require.NoError(t, err)
		got, body := b.srv.lastRequest()
		require.Empty(t, body)
		require.Empty(t, got.Header.Get("Content-Type"))
	})

	t.Run("objects are not query values", func(t *testing.T) {
		_, err := call(t, b.exec, spec, `{"id":"x","page":{"a":1}}`)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, toolErr(t, err).Type)
		_, err = call(t, b.exec, spec, `{"id":"x","tags":[[1]]}`)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, toolErr(t, err).Type)
	})
}

func TestBodyTemplate(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{})
	tmpl := `{"user": "{user}", "note": "by {author} \"{{literal}\" {not a var}", "tags": ["{tag}", "fixed"], "n": 1.50, "ok": true, "nil": null}`
	spec := b.srv.spec("tmpl", http.MethodPost, "/record/t", []string{"user", "author", "tag"},
		func(hc *toolwirev1.HttpConfig) { hc.BodyTemplate = tmpl })
	require.NoError(t, httpexec.CheckSpec(spec))
	for _, tt := range []struct{ name, args, want string }{
		{"values of any type", `{"user": {"id": 7, "name": "a\"b"}, "author": "ann <x>", "tag": 3}`,
			`{"user":{"id": 7, "name": "a\"b"},"note":"by ann \u003cx\u003e \"{literal}\" {not a var}","tags":[3,"fixed"],"n":1.50,"ok":true,"nil":null}`},
		{"absent values are left out", `{"author": 12}`,
			`{"note":"by 12 \"{literal}\" {not a var}","tags":["fixed"],"n":1.50,"ok":true,"nil":null}`},
		{"null whole values are kept", `{"user": null, "author": null}`,
			`{"user":null,"note":"by  \"{literal}\" {not a var}","tags":["fixed"],"n":1.50,"ok":true,"nil":null}`},
		{"injection stays a string", `{"author": "\", \"admin\": true, \"x\": \""}`,
			`{"note":"by \", \"admin\": true, \"x\": \" \"{literal}\" {not a var}","tags":["fixed"],"n":1.50,"ok":true,"nil":null}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, b.exec, spec, tt.args)
			require.NoError(t, err)
			_, body := b.srv.lastRequest()
			require.Equal(t, tt.want, string(body))
			require.True(t, json.Valid(body))
		})
	}

	_, err := call(t, b.exec, spec, `{"author": {"nested": 1}}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, toolErr(t, err).Type, "objects cannot be spliced into a string")
}

func TestCheckSpec(t *testing.T) {
	t.Parallel()

	spec := func(mod func(*toolwirev1.HttpConfig), props ...string) *toolwirev1.ToolSpec {
		hc := &toolwirev1.HttpConfig{Method: http.MethodPost, UrlTemplate: "https://api.example.com/v1/{id}"}
		if mod != nil {
			mod(hc)
		}
		if props == nil {
			props = []string{"id"}
		}
		return &toolwirev1.ToolSpec{Name: "t", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP,
			Config: &toolwirev1.ToolSpec_Http{Http: hc}, InputSchemaJson: schema(props...)}
	}
	require.NoError(t, httpexec.CheckSpec(spec(nil)))
	require.NoError(t, httpexec.CheckSpec(spec(func(hc *toolwirev1.HttpConfig) {
		hc.QueryArgs = []string{"q"}
		hc.BodyTemplate = `{"a":"{b}"}`
		hc.AllowHosts = []string{"*.example.com"}
		hc.AllowNetworks = []string{"10.0.0.0/8", "fd00::/8"}
		hc.AllowPorts = []int32{8443}
		hc.IntentsHeader = "X-Intents"
	}, "id", "q", "b")))

	for _, tt := range []struct {
		name  string
		spec  *toolwirev1.ToolSpec
		error string
	}{
		{"reserved expansion", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example/{+id}" }), "operator '+'"},
		{"fragment expansion", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example/{#id}" }), "operator '#'"},
		{"path expansion", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example{/id}" }), "operator '/'"},
		{"query expansion", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example/x{?id}" }), "operator '?'"},
		{"label expansion", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example/{.id}" }), "operator '.'"},
		{"list", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example/{id,x}" }), "lists"},
		{"prefix", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example/{id:3}" }), "modifiers"},
		{"explode", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example/{id*}" }), "modifiers"},
		{"unterminated", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example/{id" }), "unterminated"},
		{"host from arguments", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://{id}.example.com/" }), "after the host"},
		{"port from arguments", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example:{id}/" }), ""},
		{"scheme", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "ftp://a.example/{id}" }), "scheme"},
		{"relative", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "/v1/{id}" }), "scheme"},
		{"userinfo", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://u:p@a.example/{id}" }), "user information"},
		{"fragment", spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example/{id}#x" }), "fragment"},
		{"variable not in the schema", spec(nil, "other"), `"id", which is not a property`},
		{"query arg not in the schema", spec(func(hc *toolwirev1.HttpConfig) { hc.QueryArgs = []string{"q"} }), `"q", which is not a property`},
		{"query arg used twice", spec(func(hc *toolwirev1.HttpConfig) { hc.QueryArgs = []string{"id"} }), "already used"},
		{"body variable not in the schema", spec(func(hc *toolwirev1.HttpConfig) { hc.BodyTemplate = `{"a":"{zz}"}` }), `"zz"`},
		{"body template not JSON", spec(func(hc *toolwirev1.HttpConfig) { hc.BodyTemplate = `{"a":` }), "body_template"},
		{"body template on GET", spec(func(hc *toolwirev1.HttpConfig) { hc.Method, hc.BodyTemplate = http.MethodGet, `{}` }), "no body"},
		{"method", spec(func(hc *toolwirev1.HttpConfig) { hc.Method = "post" }), "method"},
		{"method unknown", spec(func(hc *toolwirev1.HttpConfig) { hc.Method = "TRACE" }), "method"},
		{"reserved header", spec(func(hc *toolwirev1.HttpConfig) { hc.Headers = map[string]string{"host": "x"} }), "Host"},
		{"idempotency key header", spec(func(hc *toolwirev1.HttpConfig) { hc.Headers = map[string]string{"Idempotency-Key": "x"} }), "Idempotency-Key"},
		{"header twice", spec(func(hc *toolwirev1.HttpConfig) {
			hc.Headers = map[string]string{"x-key": "a"}
			hc.SecretHeaders = map[string]string{"X-Key": "env:K"}
		}), "twice"},
		{"header value with a line break", spec(func(hc *toolwirev1.HttpConfig) { hc.Headers = map[string]string{"X-A": "a\r\nX-B: b"} }), "line breaks"},
		{"bad header name", spec(func(hc *toolwirev1.HttpConfig) { hc.Headers = map[string]string{"X A": "a"} }), "header name"},
		{"network", spec(func(hc *toolwirev1.HttpConfig) { hc.AllowNetworks = []string{"10.0.0.1"} }), "CIDR"},
		{"port", spec(func(hc *toolwirev1.HttpConfig) { hc.AllowPorts = []int32{70000} }), "port"},
		{"template host outside allow_hosts", spec(func(hc *toolwirev1.HttpConfig) { hc.AllowHosts = []string{"other.example"} }), "allow_hosts"},
		{"negative max_response_bytes", spec(func(hc *toolwirev1.HttpConfig) { hc.MaxResponseBytes = -1 }), "max_response_bytes"},
		{"no http config", &toolwirev1.ToolSpec{Name: "t"}, "no http config"},
		{"wrong executor", &toolwirev1.ToolSpec{Name: "t", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}, "not http"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := httpexec.CheckSpec(tt.spec)
			require.Error(t, err)
			require.ErrorContains(t, err, tt.error)
		})
	}

	t.Run("executor checks: the template's address and port", func(t *testing.T) {
		exec, err := httpexec.New(httpexec.Config{})
		require.NoError(t, err)
		defer func() { _ = exec.Close(context.Background()) }()
		require.ErrorContains(t, exec.CheckSpec(spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "http://127.0.0.1/{id}" })), "127.0.0.1")
		require.ErrorContains(t, exec.CheckSpec(spec(func(hc *toolwirev1.HttpConfig) { hc.UrlTemplate = "https://a.example:8443/{id}" })), "port 8443")
		require.NoError(t, exec.CheckSpec(spec(func(hc *toolwirev1.HttpConfig) {
			hc.UrlTemplate = "http://127.0.0.1:8080/{id}"
			hc.AllowNetworks = []string{"127.0.0.0/8"}
			hc.AllowPorts = []int32{8080}
		})))
	})
}
