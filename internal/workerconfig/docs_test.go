package workerconfig_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/specfile"
	"github.com/toolwire/toolwire/internal/testdeps"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// docBlock is a YAML block of docs/other-languages.md and the file it
// shows, named by the `<!-- example: PATH -->` line before it.
var docBlock = regexp.MustCompile("<!-- example: ([^ ]+) -->\n```yaml\n((?s:.*?))```\n")

// TestOtherLanguagesDocExamples: every block of docs/other-languages.md is
// the file it names as it is (a whole spec, or a contiguous part of a
// worker configuration or a spec), and that file loads: a worker
// configuration with workerconfig.Load, a spec file with the checks a
// worker runs at start-up (its executor's included).
func TestOtherLanguagesDocExamples(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/other-languages.md")
	require.NoError(t, err)
	blocks := docBlock.FindAllStringSubmatch(string(doc), -1)
	var names []string
	for _, m := range blocks {
		names = append(names, m[1])
		path := filepath.Join("..", "..", filepath.FromSlash(m[1]))
		src, err := os.ReadFile(path)
		require.NoError(t, err, "docs/other-languages.md shows %s", m[1])
		require.Contains(t, string(src), m[2], "docs/other-languages.md shows %s as it is", m[1])
		if filepath.Base(path) == "worker.yaml" {
			_, err = workerconfig.Load(path)
			require.NoError(t, err, m[1])
			continue
		}
		_, err = specfile.Load(os.DirFS(filepath.Dir(path)), filepath.Base(path), specfile.Options{
			Vars: map[string]string{"TOC_URL": "http://127.0.0.1:8787", "TOC_PORT": "8787"}})
		require.NoError(t, err, m[1])
	}
	require.Equal(t, []string{"examples/python-tool/worker.yaml", "examples/typescript-tool/markdown_toc.yaml",
		"docs/examples/sandbox-node.yaml"}, names, "the page's examples")
}

// TestSandboxNodeDocExample runs the sandboxed program of
// docs/other-languages.md (docs/examples/sandbox-node.yaml, its script
// docs/examples/text-lines.mjs installed in place of /opt/tools) with the
// machine's /usr/bin/node in a real sandbox: the JSON it prints is the
// structured output, and its exit code 3 is answered VALIDATION.
func TestSandboxNodeDocExample(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/node"); err != nil {
		testdeps.Missing(t, "install Debian's nodejs", "the example runs /usr/bin/node: %v", err)
	}
	spec, err := specfile.Load(os.DirFS("../../docs/examples"), "sandbox-node.yaml", specfile.Options{})
	require.NoError(t, err)
	dir, err := filepath.Abs("../../docs/examples")
	require.NoError(t, err)
	sc := spec.GetSandbox()
	for i, a := range sc.Argv {
		sc.Argv[i] = strings.Replace(a, "/opt/tools", dir, 1)
	}
	i := slices.Index(sc.ReadOnlyPaths, "/opt/tools")
	require.GreaterOrEqual(t, i, 0)
	sc.ReadOnlyPaths[i] = dir

	e, err := sandbox.New(sandbox.Config{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Close(ctx))
	})
	if slices.Contains(e.IsolationGaps(), sandbox.MechUserNS) {
		testdeps.Missing(t, "", "the sandbox needs user namespaces, missing on this host")
	}
	run := func(text string) (*tool.Result, error) {
		args, err := json.Marshal(map[string]string{"text": text})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		return e.Execute(ctx, &executors.Request{Spec: spec,
			Call: &toolwirev1.ToolCall{CallId: "c", Tool: spec.Name, Arguments: args, Attempt: 1}})
	}
	res, err := run("one\n\nthree\n")
	require.NoError(t, err)
	require.JSONEq(t, `{"lines":3,"non_blank":2}`, string(res.Structured))

	_, err = run("a\x00b")
	var te *tool.Error
	require.True(t, errors.As(err, &te), "want a *tool.Error, got %v", err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.Type, te.Message)
}
