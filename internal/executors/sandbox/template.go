package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// segment is one piece of an argv template element: literal text, or a
// placeholder naming an argument.
type segment struct {
	lit string
	arg string // placeholder when non-empty
}

// element is one parsed argv template element.
type element struct {
	segs []segment
	// whole says the element is exactly one placeholder.
	whole bool
}

func (el element) placeholders() []string {
	var names []string
	for _, s := range el.segs {
		if s.arg != "" {
			names = append(names, s.arg)
		}
	}
	return names
}

// template is a parsed SandboxConfig argv.
type template struct {
	elems    []element
	optional map[string]bool // arguments whose values may start with "-"
	stdinArg string
}

// parseElement splits s into literals and {name} placeholders; "{{" and
// "}}" are literal braces, any other brace is an error.
func parseElement(s string) (element, error) {
	var el element
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			el.segs = append(el.segs, segment{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return el, fmt.Errorf("unclosed { in %q (write {{ for a literal brace)", s)
			}
			name := s[i+1 : i+end]
			if !validName(name) {
				return el, fmt.Errorf("placeholder {%s} in %q: names are letters, digits, _ and -, not starting with a digit or - (write {{ and }} for literal braces)", name, s)
			}
			flush()
			el.segs = append(el.segs, segment{arg: name})
			i += end
		case c == '}':
			return el, fmt.Errorf("unmatched } in %q (write }} for a literal brace)", s)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	el.whole = len(el.segs) == 1 && el.segs[0].arg != ""
	return el, nil
}

func validName(s string) bool {
	if s == "" || s[0] == '-' || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func parseTemplate(sc *toolwirev1.SandboxConfig) (*template, error) {
	if sc == nil {
		return nil, errors.New("the spec has no sandbox config")
	}
	if len(sc.GetArgv()) == 0 {
		return nil, errors.New("argv is empty")
	}
	t := &template{optional: map[string]bool{}, stdinArg: sc.GetStdinArg()}
	for _, a := range sc.GetOptionArgs() {
		t.optional[a] = true
	}
	for i, s := range sc.GetArgv() {
		el, err := parseElement(s)
		if err != nil {
			return nil, fmt.Errorf("argv[%d]: %w", i, err)
		}
		t.elems = append(t.elems, el)
	}
	prog := t.elems[0]
	if len(prog.placeholders()) > 0 {
		return nil, errors.New("argv[0] (the program) must not contain placeholders")
	}
	if p := prog.segs[0].lit; !filepath.IsAbs(p) {
		return nil, fmt.Errorf("argv[0] %q must be an absolute path (no PATH look-up)", p)
	}
	return t, nil
}

// build substitutes args into the template. Errors are VALIDATION
// *tool.Errors naming the field.
func (t *template) build(args map[string]json.RawMessage) (argv []string, stdin []byte, err error) {
	for _, el := range t.elems {
		var b strings.Builder
		drop := false
		for j, s := range el.segs {
			if s.arg == "" {
				b.WriteString(s.lit)
				continue
			}
			raw, ok := args[s.arg]
			if !ok || isNull(raw) {
				drop = true // a missing optional argument drops its element
				break
			}
			v, err := scalar(s.arg, raw)
			if err != nil {
				return nil, nil, err
			}
			if j == 0 && strings.HasPrefix(v, "-") && !t.optional[s.arg] {
				return nil, nil, tool.InvalidArgument("/"+s.arg,
					fmt.Sprintf("value %s starts with \"-\" and would be read as an option", quoted(v)))
			}
			b.WriteString(v)
		}
		if drop {
			continue
		}
		s := b.String()
		if strings.IndexByte(s, 0) >= 0 {
			name := "/"
			if ph := el.placeholders(); len(ph) > 0 {
				name += ph[0]
			}
			return nil, nil, tool.InvalidArgument(name, "value contains a NUL byte, which no argv element can hold")
		}
		argv = append(argv, s)
	}
	if t.stdinArg != "" {
		if raw, ok := args[t.stdinArg]; ok && !isNull(raw) {
			if raw[0] == '{' || raw[0] == '[' {
				var buf bytes.Buffer
				if err := json.Compact(&buf, raw); err != nil {
					return nil, nil, tool.InvalidArgument("/"+t.stdinArg, "not valid JSON")
				}
				stdin = buf.Bytes()
			} else {
				v, err := scalar(t.stdinArg, raw)
				if err != nil {
					return nil, nil, err
				}
				stdin = []byte(v)
			}
		}
	}
	return argv, stdin, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// scalar formats one argument value: strings as they are, numbers in
// canonical decimal form, booleans as true/false; objects and arrays are
// refused.
func scalar(name string, raw json.RawMessage) (string, error) {
	field := "/" + name
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", tool.InvalidArgument(field, "not a valid JSON string")
		}
		return s, nil
	case 't', 'f':
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return "", tool.InvalidArgument(field, "not a valid JSON value")
		}
		return strconv.FormatBool(b), nil
	case '{', '[':
		return "", tool.InvalidArgument(field, "objects and arrays cannot be passed as an argv element")
	default:
		return canonicalNumber(field, string(raw))
	}
}

// canonicalNumber writes integers in plain decimal (any size, "-0" as
// "0") and other numbers in the shortest decimal form that round-trips
// through float64, never in exponent notation.
func canonicalNumber(field, s string) (string, error) {
	if !json.Valid([]byte(s)) {
		return "", tool.InvalidArgument(field, "not a valid JSON value")
	}
	if !strings.ContainsAny(s, ".eE") {
		n, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return "", tool.InvalidArgument(field, "not a valid number")
		}
		return n.String(), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return "", tool.InvalidArgument(field, "number out of range")
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		n, _ := new(big.Float).SetFloat64(f).Int(nil)
		return n.String(), nil
	}
	return strconv.FormatFloat(f, 'f', -1, 64), nil
}

// quoted quotes a value for a message, whole or not at all: a value cut
// short could be the start of a secret argument, which the worker's
// redaction (internal/redact) finds only whole.
func quoted(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("of %d bytes", len(s))
	}
	return strconv.Quote(s)
}

// CheckSpec validates a sandbox tool's spec at start-up (or when the
// registry imports it), so a broken template is found before a call. It
// returns every problem found, joined:
//
//   - the spec must have a SandboxConfig and a non-empty argv whose first
//     element is an absolute path without placeholders;
//   - placeholders use the {name} syntax ({{ and }} are literal braces) and
//     name properties of the input schema, as do stdin_arg and option_args;
//   - an element that is a whole placeholder ("operand") must come after a
//     literal "--" element or directly after a literal option element
//     (one starting with "-", whose value it is); otherwise a value could
//     be read as an operand of the wrong kind, and programs that accept
//     "--" must be given it;
//   - an optional (not required) argument must not be an option's
//     separate value ("-o {out}"): its element would be dropped and leave
//     the option dangling; embed it ("--out={out}") or make it required;
//   - env_allow and env names must be valid, and must not name the
//     helper's marker variable; limits must not be negative; paths must be
//     absolute and not /tmp (the sandbox's own); exit_codes must not map 0.
func CheckSpec(spec *toolwirev1.ToolSpec) error {
	sc := spec.GetSandbox()
	t, err := parseTemplate(sc)
	if err != nil {
		return fmt.Errorf("sandbox spec %q: %w", spec.GetName(), err)
	}
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("sandbox spec %q: "+format, append([]any{spec.GetName()}, a...)...))
	}
	props, required, err := schemaProperties(spec.GetInputSchemaJson())
	if err != nil {
		bad("input schema: %v", err)
	}
	known := func(what, name string) {
		if props != nil && !props[name] {
			bad("%s %q is not a property of the input schema", what, name)
		}
	}
	afterDashes := false
	for i, el := range t.elems {
		if i == 0 {
			continue
		}
		for _, name := range el.placeholders() {
			known(fmt.Sprintf("argv[%d]: placeholder", i), name)
		}
		if !el.whole {
			if len(el.segs) == 1 && el.segs[0].lit == "--" {
				afterDashes = true
			}
			continue
		}
		name := el.segs[0].arg
		prev := t.elems[i-1]
		prevIsOption := i > 1 && len(prev.segs) > 0 && prev.segs[0].arg == "" &&
			strings.HasPrefix(prev.segs[0].lit, "-") && !(len(prev.segs) == 1 && prev.segs[0].lit == "--")
		switch {
		case afterDashes:
		case prevIsOption:
			if required != nil && !required[name] {
				bad("argv[%d]: optional argument %q is the separate value of option %q; when it is missing the option would dangle: embed it (%s={%s}) or make it required",
					i, name, prev.segs[0].lit, prev.segs[0].lit, name)
			}
		default:
			bad("argv[%d]: operand {%s} must come after a literal \"--\" element (or directly after the option whose value it is)", i, name)
		}
	}
	if sc.GetStdinArg() != "" {
		known("stdin_arg", sc.GetStdinArg())
	}
	for _, a := range sc.GetOptionArgs() {
		known("option_args", a)
	}
	for _, n := range sc.GetEnvAllow() {
		if !validEnvName(n) {
			bad("env_allow: %q is not a valid variable name", n)
		}
	}
	for n := range sc.GetEnv() {
		if !validEnvName(n) {
			bad("env: %q is not a valid variable name", n)
		}
	}
	if l := sc.GetLimits(); l != nil {
		if l.GetWallTime().AsDuration() < 0 || l.GetCpuSeconds() < 0 || l.GetMemoryBytes() < -1 || l.GetProcesses() < 0 ||
			l.GetOpenFiles() < 0 || l.GetOutputBytes() < 0 {
			bad("limits must not be negative (memory_bytes may be -1)")
		}
	}
	for _, p := range slices.Concat(sc.GetReadOnlyPaths(), sc.GetWritablePaths()) {
		if !filepath.IsAbs(p) {
			bad("path %q must be absolute", p)
		} else if filepath.Clean(p) == "/tmp" {
			bad("path /tmp is the sandbox's own working directory and cannot be listed")
		}
	}
	if _, ok := sc.GetExitCodes()[0]; ok {
		bad("exit_codes must not map 0 (success)")
	}
	if sc.GetIntentsField() != "" && !sc.GetJsonOutput() {
		bad("intents_field needs json_output")
	}
	return errors.Join(errs...)
}

func validEnvName(n string) bool {
	return n != "" && n != helperEnv && !strings.ContainsAny(n, "=\x00") && validName(strings.ReplaceAll(n, "-", "."))
}

// schemaProperties returns the property names of a JSON Schema object and
// the required ones; nil maps when the schema is empty (unchecked).
func schemaProperties(schema string) (props, required map[string]bool, err error) {
	if strings.TrimSpace(schema) == "" {
		return nil, nil, nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		return nil, nil, fmt.Errorf("not a JSON object: %w", err)
	}
	props, required = map[string]bool{}, map[string]bool{}
	for p := range s.Properties {
		props[p] = true
	}
	for _, r := range s.Required {
		required[r] = true
	}
	return props, required, nil
}
