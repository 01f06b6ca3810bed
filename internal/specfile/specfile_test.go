package specfile_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolwire/toolwire/internal/registry"
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

// Output limits take the direction by its short name.
func TestParseOutputLimits(t *testing.T) {
	t.Parallel()
	for dir, want := range map[string]toolwirev1.TruncateDirection{
		"tail":                    toolwirev1.TruncateDirection_TRUNCATE_DIRECTION_TAIL,
		"HEAD":                    toolwirev1.TruncateDirection_TRUNCATE_DIRECTION_HEAD,
		"TRUNCATE_DIRECTION_TAIL": toolwirev1.TruncateDirection_TRUNCATE_DIRECTION_TAIL,
	} {
		doc := sandboxSpec + "limits: {max_output_bytes: 4096, max_output_lines: 100, truncate: " + dir + "}\n"
		spec, err := specfile.Parse([]byte(doc), specfile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		l := spec.GetLimits()
		if l.GetMaxOutputBytes() != 4096 || l.GetMaxOutputLines() != 100 || l.GetTruncate() != want {
			t.Fatalf("%s: limits %v", dir, l)
		}
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
		{"BadTruncate", base(func(s string) string { return s + "limits: {truncate: middle}\n" }), `limits: truncate: unknown value "middle"`},
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

// yaml11Words are every word YAML 1.1 reads as a boolean.
var yaml11Words = strings.Fields("y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF")

// Spec files are YAML 1.2: only true and false (also True, TRUE, False,
// FALSE) are booleans. Every other YAML 1.1 boolean word stays a string,
// and a mapping key is always its text. Before, a property named n became
// "false", so {"n": 99999} passed a maximum of 10 on n.
func TestYAML11BooleanWordsStayWords(t *testing.T) {
	t.Parallel()
	var props, enum strings.Builder
	var onlyYAML11 []string // the words YAML 1.2 does not read as booleans
	for _, w := range yaml11Words {
		fmt.Fprintf(&props, "    %s: {type: integer, maximum: 10}\n", w)
		fmt.Fprintf(&enum, "%s, ", w)
		if strings.ToLower(w) != "true" && strings.ToLower(w) != "false" {
			onlyYAML11 = append(onlyYAML11, w)
		}
	}
	doc := `
name: words
summary: Takes every YAML 1.1 boolean word.
doc: A test of YAML 1.2 reading.
executor: sandbox
input_schema:
  type: object
  properties:
` + props.String() + `    answer: {enum: [` + strings.TrimSuffix(enum.String(), ", ") + `]}
  required: [` + strings.Join(onlyYAML11, ", ") + `]
sandbox:
  argv: [echo]
`
	spec, err := specfile.Parse([]byte(doc), specfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]struct {
			Maximum *float64 `json:"maximum"`
			Enum    []any    `json:"enum"`
		} `json:"properties"`
		Required []any `json:"required"`
	}
	if err := json.Unmarshal([]byte(spec.InputSchemaJson), &schema); err != nil {
		t.Fatal(err)
	}
	if len(schema.Properties) != len(yaml11Words)+1 {
		t.Fatalf("properties %v, want one per word plus answer", schema.Properties)
	}
	booleans := map[string]any{"true": true, "True": true, "TRUE": true, "false": false, "False": false, "FALSE": false}
	for i, w := range yaml11Words {
		if p, ok := schema.Properties[w]; !ok || p.Maximum == nil || *p.Maximum != 10 {
			t.Errorf("property %q lost or changed: %v", w, schema.Properties)
		}
		want := any(w)
		if b, ok := booleans[w]; ok {
			want = b
		}
		if got := schema.Properties["answer"].Enum[i]; got != want {
			t.Errorf("enum value %q read as %#v, want %#v", w, got, want)
		}
	}

	if len(schema.Required) != len(onlyYAML11) {
		t.Fatalf("required %v, want %v", schema.Required, onlyYAML11)
	}
	for i, w := range onlyYAML11 {
		if schema.Required[i] != w {
			t.Errorf("required[%d] = %#v, want the string %q", i, schema.Required[i], w)
		}
	}

	// The schema does what it says: 99999 is over the maximum on n, y, on...
	input, err := registry.DefaultSchemas.Compile(spec.InputSchemaJson)
	if err != nil {
		t.Fatal(err)
	}
	valid := map[string]any{}
	for _, w := range yaml11Words {
		valid[w] = 1
	}
	args, _ := json.Marshal(valid)
	if vs := registry.ValidateArgs(input, args); len(vs) != 0 {
		t.Fatalf("valid arguments refused: %v", vs)
	}
	for _, w := range []string{"n", "y", "on", "off", "yes", "no", "True"} {
		valid[w] = 99999
		args, _ := json.Marshal(valid)
		vs := registry.ValidateArgs(input, args)
		if len(vs) != 1 || vs[0].Field != "/"+w {
			t.Errorf("%s=99999: violations %v, want one at /%s", w, vs, w)
		}
		valid[w] = 1
	}
}

// A YAML 1.1 word where the spec wants a boolean is an error, not a
// silent true; a key repeated in one mapping is an error; anchors and
// merge keys still work.
func TestYAML12Strictness(t *testing.T) {
	t.Parallel()
	base := func(edit func(string) string) []byte { return []byte(edit(sandboxSpec)) }
	if _, err := specfile.Parse(base(func(s string) string {
		return strings.Replace(s, "{read_only: true, idempotent: true}", "{read_only: yes, idempotent: true}", 1)
	}), specfile.Options{}); err == nil || !strings.Contains(err.Error(), `"yes"`) {
		t.Fatalf("read_only: yes: %v", err)
	}
	if _, err := specfile.Parse(base(func(s string) string { return s + "title: again\n" }), specfile.Options{}); err == nil ||
		!strings.Contains(err.Error(), `"title" repeated`) {
		t.Fatalf("repeated key: %v", err)
	}
	spec, err := specfile.Parse(base(func(s string) string {
		s = strings.Replace(s, "    text: {type: string, maxLength: 100000}", "    text: &text {type: string, maxLength: 100000}\n    other: *text\n    more: {<<: *text, maxLength: 5}", 1)
		return s
	}), specfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(spec.InputSchemaJson, `"other":{"maxLength":100000,"type":"string"}`) ||
		!strings.Contains(spec.InputSchemaJson, `"more":{"maxLength":5,"type":"string"}`) {
		t.Fatalf("aliases and merges: %s", spec.InputSchemaJson)
	}
}
