package redact_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const schema = `{"type":"object","properties":{
	"user":{"type":"string"},
	"token":{"type":"string","pattern":"^[a-z]+$","x-toolwire-secret":true},
	"pin":{"type":"string","x-toolwire-secret":true},
	"nested":{"type":"array","items":{"type":"object","properties":{"key":{"x-toolwire-secret":true}}}},
	"extra":{"type":"object","additionalProperties":{"x-toolwire-secret":true}}}}`

const canary = `Canary-7f3a <&"/ 9e`

func args(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"user": "ann", "token": canary, "pin": "42",
		"nested": []any{map[string]any{"key": 1234567}}, "extra": map[string]any{"x": "extra-secret"}})
	require.NoError(t, err)
	return b
}

func TestArgumentsRedactsTheFieldsWhateverTheirLength(t *testing.T) {
	t.Parallel()
	got := string(redact.Compile(schema).Arguments(args(t)))
	require.JSONEq(t, `{"user":"ann","token":"[REDACTED]","pin":"[REDACTED]","nested":[{"key":"[REDACTED]"}],"extra":{"x":"[REDACTED]"}}`, got)
}

func TestArgumentsFailClosed(t *testing.T) {
	t.Parallel()
	a := []byte(`{"user":"ann","password":"hunter2","n":12345678901234567890}`)
	cases := []struct {
		name, schema string
		wantWhole    bool
	}{
		{"Properties", `{"type":"object","properties":{"password":{"type":"string","x-toolwire-secret":true}}}`, false},
		{"Ref", `{"type":"object","$defs":{"pw":{"type":"string","x-toolwire-secret":true}},"properties":{"password":{"$ref":"#/$defs/pw"}}}`, true},
		{"AllOf", `{"allOf":[{"type":"object","properties":{"password":{"x-toolwire-secret":true}}}]}`, true},
		{"NotJSON", `{"x-toolwire-secret":`, true},
	}
	for _, c := range cases {
		p := redact.Compile(c.schema)
		got := string(p.Arguments(a))
		require.NotContains(t, got, "hunter2", c.name)
		require.Equal(t, c.wantWhole, got == `"[REDACTED]"`, "%s: %s", c.name, got)
		if !c.wantWhole {
			require.Contains(t, got, `"ann"`, c.name)
			require.Contains(t, got, "12345678901234567890", "%s: big integers stay exact", c.name)
		}
		// Values of an incomplete plan: every argument counts.
		s := p.Secrets(a)
		require.Equal(t, "x [REDACTED] y", s.String("x hunter2 y"), c.name)
		if c.wantWhole {
			require.Equal(t, "[REDACTED]", s.String("12345678901234567890"), c.name)
		}
	}
	require.Equal(t, `"[REDACTED]"`, string(redact.Compile(schema).Arguments([]byte(`{"token":`))), "arguments that are not JSON")
}

func TestNoSecretsMeansNothingChanges(t *testing.T) {
	t.Parallel()
	require.Nil(t, redact.Compile(`{"type":"object","properties":{"text":{"type":"string"}}}`))
	require.Nil(t, redact.ForSpec(nil))
	var p *redact.Plan
	require.Nil(t, p.Secrets([]byte(`{"a":"b"}`)))
	require.Equal(t, `{"n":12345678901234567890}`, string(p.Arguments([]byte(`{"n":12345678901234567890}`))), "exact bytes")
	require.Equal(t, `"not json"`, string(p.Arguments([]byte(`not json`))))
	// A plan with secrets whose arguments do not carry them.
	require.Nil(t, redact.Compile(schema).Secrets([]byte(`{"user":"ann"}`)))

	var s *redact.Secrets
	te := &toolwirev1.ToolError{Message: "m"}
	s.ToolError(te)
	s.Response(&toolwirev1.ToolResponse{})
	s.Event(nil)
	require.Equal(t, "m", te.Message)
	err := errors.New("x")
	require.Same(t, err, s.Err(err))
}

func TestSecretsReplaceEveryForm(t *testing.T) {
	t.Parallel()
	s := redact.Compile(schema).Secrets(args(t))
	j, _ := json.Marshal(canary)
	jj, _ := json.Marshal(string(j))
	u := &url.URL{Scheme: "https", Host: "api.example.com", Path: "/v1/" + canary, RawQuery: url.Values{"token": {canary}}.Encode()}
	_, netErr := http.Get("http://127.0.0.1:0/?token=" + url.QueryEscape(canary))
	require.Error(t, netErr)
	for _, text := range []string{
		"plain " + canary + " text",
		"json " + string(j),
		"json twice " + string(jj),
		"quoted " + strconv.Quote(canary),
		"url " + u.String(),
		fmt.Sprintf("%q", u.String()),
		"net/http: " + netErr.Error(),
		"strict %-encoding Canary-7f3a%20%3C%26%22%2F%209e",
		"number 1234567 and extra-secret",
	} {
		got := s.String(text)
		require.NotContains(t, got, "7f3a", text)
		require.NotContains(t, got, "1234567", text)
		require.NotContains(t, got, "extra-secret", text)
		require.Contains(t, got, redact.Redacted, text)
	}
	same := "nothing secret here, 42 and ann"
	require.Equal(t, same, s.String(same), "short values only where quoted")
	require.Equal(t, `pin '[REDACTED]' and "[REDACTED]"`, s.String(`pin '42' and "42"`))
}

func TestNoAllocationWithoutASecret(t *testing.T) { // not parallel: AllocsPerRun
	s := redact.Compile(schema).Secrets(args(t))
	same := "nothing secret here, 42 and ann"
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = s.String(same) }))
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = s.JSON(`{"text":"hello"}`) }))
	echo := `{"type":"object","properties":{"text":{"type":"string"}}}`
	a := []byte(`{"text":"x"}`)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = redact.Compile(echo).Secrets(a) }))
}

func TestJSONStaysValid(t *testing.T) {
	t.Parallel()
	s := redact.Compile(schema).Secrets(args(t))
	doc, _ := json.Marshal(map[string]any{"echo": canary, "n": 1234567, "pin": "42", "pins": "42 and 43", canary: true})
	got := s.JSON(string(doc))
	require.True(t, json.Valid([]byte(got)), got)
	require.JSONEq(t, `{"echo":"[REDACTED]","n":"[REDACTED]","pin":"[REDACTED]","pins":"42 and 43","[REDACTED]":true}`, got)
	require.Equal(t, "not json "+redact.Redacted, s.JSON("not json "+canary))
	plain := `{"a":1}`
	require.Equal(t, plain, s.JSON(plain))
}

func TestMessagesAreRedactedWithoutTouchingSharedContent(t *testing.T) {
	t.Parallel()
	s := redact.Compile(schema).Secrets(args(t))
	shared := tool.Text("tool output: " + canary)
	viol := &toolwirev1.FieldViolation{Field: "/token", Message: "'" + canary + "' does not match pattern"}
	resp := &toolwirev1.ToolResponse{Content: []*toolwirev1.Content{shared, tool.Text("fine")},
		StructuredJson: `{"t":` + strconv.Quote(canary) + `}`,
		Error:          &toolwirev1.ToolError{Message: "bad " + canary, Suggestion: canary, Violations: []*toolwirev1.FieldViolation{viol}}}
	s.Response(resp)
	out, err := json.Marshal(resp)
	require.NoError(t, err)
	require.NotContains(t, string(out), "7f3a")
	require.Contains(t, shared.GetText().GetText(), canary, "a tool's shared content is copied, not changed")
	require.Contains(t, viol.Message, canary, "a tool's shared violation is copied, not changed")
	require.Equal(t, "fine", resp.Content[1].GetText().GetText())

	ev := &toolwirev1.CallEvent{Message: canary, Error: &toolwirev1.ToolError{Message: canary}, Partial: []*toolwirev1.Content{tool.Text(canary)}}
	s.Event(ev)
	dl := &toolwirev1.DeadLetter{Reason: canary, LastError: &toolwirev1.ToolError{Message: canary}, Call: &toolwirev1.ToolCall{Arguments: args(t)}}
	s.DeadLetter(dl)
	for _, m := range []any{ev, dl.Reason, dl.LastError} {
		b, _ := json.Marshal(m)
		require.NotContains(t, string(b), "7f3a")
	}
	require.Contains(t, string(dl.Call.Arguments), "7f3a", "a dead letter keeps the call it retries")
}

func TestErrKeepsTypesAndCauses(t *testing.T) {
	t.Parallel()
	s := redact.Compile(schema).Secrets(args(t))

	te := &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Message: "upstream said " + canary, Retryable: true, Cause: context.DeadlineExceeded}
	got := s.Err(te)
	var gte *tool.Error
	require.ErrorAs(t, got, &gte)
	require.NotContains(t, gte.Message, "7f3a")
	require.True(t, gte.Retryable)
	require.ErrorIs(t, got, context.DeadlineExceeded)
	require.Contains(t, te.Message, canary, "the tool's error is not changed")

	wrapped := fmt.Errorf("calling %s: %w", canary, te)
	got = s.Err(wrapped)
	require.NotContains(t, got.Error(), "7f3a")
	require.ErrorAs(t, got, &gte)
	require.NotContains(t, gte.Message, "7f3a", "errors.As finds the redacted copy first")

	plain := fmt.Errorf("open %s: %w", canary, context.Canceled)
	got = s.Err(plain)
	require.NotContains(t, got.Error(), "7f3a")
	require.ErrorIs(t, got, context.Canceled)

	clean := errors.New("nothing")
	require.Same(t, clean, s.Err(clean))
	require.Equal(t, error(te), redact.Compile(schema).Secrets([]byte(`{"token":"other-value"}`)).Err(te))
}

func TestResultCopiesOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	s := redact.Compile(schema).Secrets(args(t))
	clean := &tool.Result{Content: []*toolwirev1.Content{tool.Text("ok")}, Structured: []byte(`{"ok":true}`)}
	require.Same(t, clean, s.Result(clean))
	dirty := &tool.Result{Content: []*toolwirev1.Content{tool.Text(canary)}, Structured: []byte(`{"t":1234567}`),
		Intents: []*toolwirev1.Intent{{Id: "i"}}}
	got := s.Result(dirty)
	require.NotSame(t, dirty, got)
	require.NotContains(t, got.Content[0].GetText().GetText(), "7f3a")
	require.JSONEq(t, `{"t":"[REDACTED]"}`, string(got.Structured))
	require.Equal(t, dirty.Intents, got.Intents)
}

// TestNativeSecretTag: the struct tag of native tools compiles to a plan.
func TestNativeSecretTag(t *testing.T) {
	t.Parallel()
	type in struct {
		User     string `json:"user"`
		Password string `json:"password" toolwire:"secret"`
	}
	tl := tool.Must(tool.New("login", func(context.Context, in) (string, error) { return "", nil }))
	p := redact.ForSpec(tl.Spec())
	require.NotNil(t, p)
	require.Equal(t, "[REDACTED]", p.Secrets([]byte(`{"user":"ann","password":"hunter22"}`)).String("hunter22"))
	require.NoError(t, registry.Check(tl.Spec()))
}

// BenchmarkNoSecrets is what the hot path pays per use for a tool without
// secret fields (the benchmark tool echo).
func BenchmarkNoSecrets(b *testing.B) {
	var echo *toolwirev1.ToolSpec
	for _, tl := range builtin.Tools() {
		if tl.Name() == "echo" {
			echo = tl.Spec()
		}
	}
	a := []byte(`{"text":"hello"}`)
	resp := &toolwirev1.ToolResponse{Content: []*toolwirev1.Content{tool.Text("hello")}, StructuredJson: `{"text":"hello"}`}
	b.ReportAllocs()
	for b.Loop() {
		redact.ForSpec(echo).Secrets(a).Response(resp)
	}
}

// BenchmarkSecretsCall is one call of a tool with a secret field: the
// arguments parsed once, a response without the secret checked.
func BenchmarkSecretsCall(b *testing.B) {
	spec := &toolwirev1.ToolSpec{InputSchemaJson: schema}
	a := []byte(`{"user":"ann","token":"abcdefghijkl"}`)
	resp := &toolwirev1.ToolResponse{Content: []*toolwirev1.Content{tool.Text("hello ann")}, StructuredJson: `{"text":"hello"}`}
	b.ReportAllocs()
	for b.Loop() {
		redact.ForSpec(spec).Secrets(a).Response(resp)
	}
}
