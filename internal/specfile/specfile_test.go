package specfile_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolwire/toolwire/internal/specfile"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const sandboxSpec = `
name: sha256
title: SHA-256 of a text
summary: |
  Computes the SHA-256 digest of a text.
  Use it to fingerprint content.
doc: |
  Returns the hex digest followed by "-".
executor: sandbox
category: utility
annotations: {read_only: true, idempotent: true}
timeouts: {start_to_close: 10s}
input_schema:
  type: object
  properties:
    text: {type: string, maxLength: 100000}
  required: [text]
  additionalProperties: false
sandbox:
  argv: [sha256sum]
  stdin_arg: text
  exit_codes: {2: validation}
  limits: {wall_time: 5s, memory_bytes: 67108864}
`

func TestParseSandbox(t *testing.T) {
	t.Parallel()
	spec, err := specfile.Parse([]byte(sandboxSpec), specfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Executor != toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX || spec.Provider != specfile.DefaultProvider ||
		spec.Category != toolwirev1.ToolCategory_TOOL_CATEGORY_UTILITY {
		t.Fatalf("spec: %v", spec)
	}
	if spec.GetSandbox().GetExitCodes()[2] != toolwirev1.ErrorType_ERROR_TYPE_VALIDATION {
		t.Fatalf("exit codes: %v", spec.GetSandbox().GetExitCodes())
	}
	if spec.Timeouts.StartToClose.AsDuration().String() != "10s" || spec.GetSandbox().GetLimits().GetMemoryBytes() != 64<<20 {
		t.Fatalf("durations/limits: %v", spec)
	}
	if !strings.Contains(spec.InputSchemaJson, `"maxLength":100000`) || !spec.GetAnnotations().GetReadOnly() {
		t.Fatalf("schema/annotations: %v", spec)
	}
	if spec.Description != spec.Summary {
		t.Fatalf("description defaults to the summary: %q", spec.Description)
	}
}

func TestParseVars(t *testing.T) {
	t.Parallel()
	doc := `
name: clock
summary: Tells the time.
doc: Full doc.
executor: http
input_schema: {type: object}
http: {method: GET, url_template: "${TOOLWIRE_HTTP}/demo/time"}
`
	spec, err := specfile.Parse([]byte(doc), specfile.Options{Vars: map[string]string{"TOOLWIRE_HTTP": "http://127.0.0.1:8080"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.GetHttp().GetUrlTemplate(); got != "http://127.0.0.1:8080/demo/time" {
		t.Fatalf("url template %q", got)
	}
	if _, err := specfile.Parse([]byte(doc), specfile.Options{}); err == nil || !strings.Contains(err.Error(), "${TOOLWIRE_HTTP}") {
		t.Fatalf("unknown variable: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	base := func(edit func(string) string) string { return edit(sandboxSpec) }
	cases := []struct {
		name, doc, want string
	}{
		{"NotYAML", "name: [", "not YAML"},
		{"NotMapping", "- a\n- b", "not a YAML mapping"},
		{"UnknownField", base(func(s string) string { return s + "colour: blue\n" }), "colour"},
		{"NoSummary", base(func(s string) string {
			return strings.Replace(s, "summary: |\n  Computes the SHA-256 digest of a text.\n  Use it to fingerprint content.\n", "", 1)
		}), "summary is required"},
		{"LongSummary", base(func(s string) string {
			return strings.Replace(s, "  Use it to fingerprint content.\n", "  2\n  3\n  4\n  5\n", 1)
		}), "5 lines"},
		{"NoDoc", base(func(s string) string {
			return strings.Replace(s, "doc: |\n  Returns the hex digest followed by \"-\".\n", "", 1)
		}), "doc is required"},
		{"BadExecutor", base(func(s string) string { return strings.Replace(s, "executor: sandbox", "executor: shell", 1) }), `unknown value "shell"`},
		{"BadName", base(func(s string) string { return strings.Replace(s, "name: sha256", "name: sha 256", 1) }), "must match"},
		{"BadSchema", base(func(s string) string { return strings.Replace(s, "type: object", "type: 12", 1) }), "input schema"},
		{"SchemaNotObject", base(func(s string) string {
			return strings.Replace(s, "input_schema:\n", "input_schema: '{}'\nx_input_schema:\n", 1)
		}), "input_schema: want a mapping"},
		{"WrongConfig", base(func(s string) string { return strings.Replace(s, "executor: sandbox", "executor: http", 1) }), "needs its config"},
		{"Version", base(func(s string) string { return s + "version: abc\n" }), "set by the registry"},
		{"BadExitCode", base(func(s string) string { return strings.Replace(s, "{2: validation}", "{2: oops}", 1) }), "exit_codes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := specfile.Parse([]byte(c.doc), specfile.Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
}

func TestRegisteredCheck(t *testing.T) {
	// Not parallel: it registers a check for a type other tests do not use.
	specfile.RegisterCheck(toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP, func(s *toolwirev1.ToolSpec) error {
		return errors.New("mcp tools come from servers, not files")
	})
	doc := `
name: m
summary: s
doc: d
executor: mcp
input_schema: {type: object}
mcp: {server: a, tool: b}
`
	if _, err := specfile.Parse([]byte(doc), specfile.Options{}); err == nil || !strings.Contains(err.Error(), "not files") {
		t.Fatalf("registered check not run: %v", err)
	}
}

func TestLoadDir(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"tools/sha256.yaml": {Data: []byte(sandboxSpec)},
		"tools/README.md":   {Data: []byte("not a spec")},
		"tools/copy.yml":    {Data: []byte(sandboxSpec)},
		"tools/broken.json": {Data: []byte(`{"name": 1}`)},
		"tools/sub/x.yaml":  {Data: []byte("ignored: true")},
		"other/sha256.yaml": {Data: []byte(sandboxSpec)},
	}
	specs, err := specfile.LoadDir(fsys, "tools", specfile.Options{})
	if err == nil || !strings.Contains(err.Error(), "tools/broken.json") || !strings.Contains(err.Error(), "also declared in tools/copy.yml") {
		t.Fatalf("want errors naming broken.json and the duplicate, got %v", err)
	}
	if len(specs) != 1 || specs[0].Name != "sha256" {
		t.Fatalf("specs: %v", specs)
	}
	if specs, err := specfile.LoadDir(fsys, "other", specfile.Options{}); err != nil || len(specs) != 1 {
		t.Fatalf("other: %v %v", specs, err)
	}
}
