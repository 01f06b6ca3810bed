package sandbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestSmoke(t *testing.T) {
	e, err := sandbox.New(sandbox.Config{})
	require.NoError(t, err)
	t.Log("gaps", e.IsolationGaps())
	for _, argv := range [][]string{{"/usr/bin/printf", "%s", "{text}"}, {fixtureBin, "id"}, {fixtureBin, "env"}, {"/bin/cat", "/proc/self/status"}, {"/bin/ls", "-la", "/", "/tmp", "/proc"}} {
		res, err := e.Execute(context.Background(), &executors.Request{
			Call: &toolwirev1.ToolCall{Arguments: []byte(`{"text":"hello"}`)},
			Spec: &toolwirev1.ToolSpec{Config: &toolwirev1.ToolSpec_Sandbox{Sandbox: &toolwirev1.SandboxConfig{Argv: argv, ReadOnlyPaths: []string{fixtureBin}}}},
		})
		if err != nil {
			t.Log(argv, err)
			continue
		}
		t.Log(argv, res.Content[0].GetText().GetText())
	}
}
