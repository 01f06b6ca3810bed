//go:build linux

package sandbox_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// argvOf decodes the fixture's "argv" output.
func argvOf(t *testing.T, out string) []string {
	t.Helper()
	var got []string
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	return got
}

func TestArguments(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tool := spec(fixture("argv", "-n", "{n}", "--flag={opt}", "{{literal}}", "--", "{a}", "{b}", "x{c}y"))

	for _, tt := range []struct {
		name string
		args string
		want []string
	}{
		{"strings as they are", `{"n":"1","opt":"o","a":"hello world","b":"*","c":"$HOME"}`,
			[]string{"-n", "1", "--flag=o", "{literal}", "--", "hello world", "*", "x$HOMEy"}},
		{"integers of any size", `{"n":12345678901234567890123,"a":0,"b":-0}`,
			[]string{"-n", "12345678901234567890123", "{literal}", "--", "0", "0"}},
		{"other numbers in plain decimal", `{"n":1.5,"a":1e3,"b":2.50E-3,"c":1e21}`,
			[]string{"-n", "1.5", "{literal}", "--", "1000", "0.0025", "x1000000000000000000000y"}},
		{"booleans", `{"n":true,"a":false}`, []string{"-n", "true", "{literal}", "--", "false"}},
		{"missing and null arguments drop their element", `{"n":"1","a":null}`, []string{"-n", "1", "{literal}", "--"}},
		{"an embedded value may start with -", `{"n":"1","opt":"-x","c":"-y"}`, []string{"-n", "1", "--flag=-x", "{literal}", "--", "x-yy"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, argvOf(t, text(t, e, tool, tt.args)))
		})
	}

	for _, tt := range []struct {
		name, args, field, message string
	}{
		{"an object", `{"a":{"x":1}}`, "/a", "objects and arrays cannot be passed"},
		{"an array", `{"b":[1]}`, "/b", "objects and arrays cannot be passed"},
		{"an option-looking value", `{"a":"-rf"}`, "/a", `value "-rf" starts with "-"`},
		// Quoted whole or not at all: a cut value may be a secret's start,
		// which redaction finds only whole.
		{"a long option-looking value", `{"a":"-123456789012345678901234567890123456789012345"}`, "/a", `value of 46 bytes starts with "-"`},
		{"a negative number", `{"n":-1}`, "/n", `starts with "-"`},
		{"a NUL byte", `{"a":"x\u0000y"}`, "/a", "NUL byte"},
		{"arguments that are not an object", `["a"]`, "", "must be a JSON object"},
		{"arguments that are not JSON", `{`, "", "must be a JSON object"},
	} {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			t.Parallel()
			te := failure(t, e, tool, tt.args)
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.Type)
			require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.SideEffects)
			require.Contains(t, te.Message, tt.message)
			require.Len(t, te.Violations, 1)
			require.Equal(t, tt.field, te.Violations[0].Field)
		})
	}

	t.Run("stdin", func(t *testing.T) {
		t.Parallel()
		s := spec(fixture("stdin"), func(sc *toolwirev1.SandboxConfig) { sc.StdinArg = "in" })
		require.Equal(t, "-not an option\n$(id)", text(t, e, s, `{"in":"-not an option\n$(id)"}`))
		require.Equal(t, `{"k":[1,2]}`, text(t, e, s, `{"in": {"k": [1, 2]}}`), "objects arrive as compact JSON")
		require.Equal(t, "", text(t, e, s, `{}`))
	})
}

func TestCheckSpec(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{"a":{},"b":{},"out":{}},"required":["a"]}`
	mk := func(argv []string, opts ...func(*toolwirev1.SandboxConfig)) *toolwirev1.ToolSpec {
		s := spec(argv, opts...)
		s.Name, s.InputSchemaJson = "tool", schema
		return s
	}
	require.NoError(t, sandbox.CheckSpec(mk([]string{"/bin/ls", "-l", "--color={b}", "--", "{a}", "{b}"})))
	require.NoError(t, sandbox.CheckSpec(mk([]string{"/bin/x", "-o", "{a}", "--", "{b}"})), "a required option value")
	require.NoError(t, sandbox.CheckSpec(mk([]string{"/usr/bin/awk", "{{print $1}}"})), "literal braces")

	for _, tt := range []struct {
		name string
		spec *toolwirev1.ToolSpec
		want string
	}{
		{"no sandbox config", &toolwirev1.ToolSpec{Name: "x"}, "no sandbox config"},
		{"empty argv", mk(nil), "argv is empty"},
		{"a relative program", mk([]string{"ls", "--", "{a}"}), "must be an absolute path"},
		{"a placeholder program", mk([]string{"{a}"}), "must not contain placeholders"},
		{"an unknown placeholder", mk([]string{"/bin/ls", "--", "{nope}"}), `placeholder "nope" is not a property`},
		{"an operand before --", mk([]string{"/bin/rm", "{a}"}), `operand {a} must come after a literal "--"`},
		{"a dangling optional option value", mk([]string{"/bin/x", "-o", "{out}", "--", "{a}"}), "the option would dangle"},
		{"an unclosed brace", mk([]string{"/bin/x", "{a"}), "unclosed {"},
		{"a stray brace", mk([]string{"/bin/x", "a}"}), "unmatched }"},
		{"a bad placeholder name", mk([]string{"/bin/x", "--", "{a b}"}), "placeholder {a b}"},
		{"an unknown stdin_arg", mk([]string{"/bin/cat"}, func(sc *toolwirev1.SandboxConfig) { sc.StdinArg = "zz" }), `stdin_arg "zz"`},
		{"an unknown option_arg", mk([]string{"/bin/cat"}, func(sc *toolwirev1.SandboxConfig) { sc.OptionArgs = []string{"zz"} }), `option_args "zz"`},
		{"a bad env name", mk([]string{"/bin/cat"}, func(sc *toolwirev1.SandboxConfig) { sc.EnvAllow = []string{"A=B"} }), "not a valid variable name"},
		{"the helper marker", mk([]string{"/bin/cat"}, func(sc *toolwirev1.SandboxConfig) { sc.Env = map[string]string{"TOOLWIRE_SANDBOX_HELPER": "1"} }), "not a valid variable name"},
		{"/tmp listed", mk([]string{"/bin/cat"}, func(sc *toolwirev1.SandboxConfig) { sc.ReadOnlyPaths = []string{"/tmp/"} }), "path /tmp is the sandbox's own"},
		{"a relative path", mk([]string{"/bin/cat"}, func(sc *toolwirev1.SandboxConfig) { sc.WritablePaths = []string{"data"} }), "must be absolute"},
		{"exit code 0 mapped", mk([]string{"/bin/cat"}, func(sc *toolwirev1.SandboxConfig) {
			sc.ExitCodes = map[int32]toolwirev1.ErrorType{0: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT}
		}), "must not map 0"},
		{"intents without json_output", mk([]string{"/bin/cat"}, func(sc *toolwirev1.SandboxConfig) { sc.IntentsField = "i" }), "needs json_output"},
		{"negative limits", mk([]string{"/bin/cat"}, withLimits(&toolwirev1.SandboxLimits{Processes: -1})), "must not be negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorContains(t, sandbox.CheckSpec(tt.spec), tt.want)
		})
	}
}

// injectionCorpus is at least 200 hostile values: shell syntax of every
// kind, globs, expansions, control characters, option injection and
// path tricks, alone and embedded in text.
func injectionCorpus() []string {
	base := []string{
		";", "; rm -rf /", ";id", "$(id)", "$(rm -rf ~)", "`id`", "`uname -a`", "&& id", "& id", "|| id", "| cat /etc/passwd",
		"|id", "\nid", "\r\nid", "\x00", "*", "?", "[a-z]*", "/*", "~", "~root", "${IFS}", "$IFS", "${IFS}id", "${PATH}",
		"$HOME", "$0", "$$", "$?", "$@", "'", "\"", "\\", "\\\"", "'\"'\"'", "a b", "\t", "\v", "\f", "<", ">", ">>/tmp/x",
		"2>&1", "<(id)", ">(id)", "<<EOF", "!", "!!", "!-1", "#", "%s%n%x", "{a,b}", "{1..3}", "$((1+1))", "$[1+1]",
		"%0a", "\x1b[31mred", "\u202eevil", "\u00e9\u4e16\U0001F680", "../../etc/passwd", "/etc/shadow", "..", ".",
		"-rf", "-rf /", "--output=/x", "-", "--", "-e", "-e id", "--help", "-o/tmp/x", "--exec=id", "-n", "-0",
		"=", "a=b", "IFS=; id", "@file", "+x", "^", "(id)", "{id}", "{{id}}", "{a}", "$'\\x41'", "\\$(id)", "*(id)",
		"exec id", "eval id", "id #", "a\x7fb", "\u0085", "\u2028", "\"; id; \"", "'; id; '", "`", "$", "&", "|",
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] && !strings.ContainsRune(s, 0) {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, b := range base {
		add(b)
		add("x" + b)
		add(b + "x")
		add("safe " + b + " text")
		add("-" + b) // each also as option injection
	}
	return out
}

// TestInjection: every hostile value arrives byte for byte as exactly one
// argv element (alone, or embedded in a larger element) and on stdin, or
// is refused as an option; nothing is interpreted. Values go ten to a
// call, each through its own placeholder, to keep the test short.
func TestInjection(t *testing.T) {
	t.Parallel()
	e := setup(t)
	corpus := injectionCorpus()
	require.GreaterOrEqual(t, len(corpus), 200)

	const per = 10
	argv := fixture("argv+stdin", "--")
	var names []string
	for i := range per {
		name := fmt.Sprintf("v%d", i)
		names = append(names, name)
		argv = append(argv, "{"+name+"}", "--file={"+name+"}")
	}
	strict := spec(argv, func(sc *toolwirev1.SandboxConfig) { sc.StdinArg = "v0" })
	lenient := spec(argv, func(sc *toolwirev1.SandboxConfig) { sc.StdinArg = "v0"; sc.OptionArgs = names })
	check := func(s *toolwirev1.ToolSpec, batch []string) {
		args := map[string]string{}
		want := []string{"--"}
		for i, v := range batch {
			args[names[i]] = v
			want = append(want, v, "--file="+v)
		}
		got, err := call(t.Context(), e, s, args)
		if assert.NoError(t, err, "values %q", batch) {
			var out struct {
				Argv  []string
				Stdin string
			}
			assert.NoError(t, json.Unmarshal([]byte(got.Content[0].GetText().GetText()), &out))
			assert.Equal(t, want, out.Argv, "values %q", batch)
			assert.Equal(t, batch[0], out.Stdin, "value %q on stdin", batch[0])
		}
	}

	var plain []string
	dashed := 0
	for _, v := range corpus {
		if strings.HasPrefix(v, "-") {
			dashed++
			_, err := call(t.Context(), e, strict, map[string]string{"v3": v})
			require.ErrorContains(t, err, `invalid argument "/v3"`, "value %q", v)
			require.ErrorContains(t, err, "would be read as an option", "value %q", v)
		} else {
			plain = append(plain, v)
		}
	}
	sem := make(chan struct{}, 4) // two cores, shared with other packages' tests
	var wg sync.WaitGroup
	run := func(s *toolwirev1.ToolSpec, values []string) {
		for batch := range slices.Chunk(values, per) {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				check(s, batch)
			})
		}
	}
	require.Greater(t, dashed, 40, "option injection is well represented")
	run(strict, plain)
	run(lenient, corpus)
	wg.Wait()
}
