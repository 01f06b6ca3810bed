//go:build linux

package sandbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	d := sandbox.Config{}.WithDefaults()
	require.Equal(t, sandbox.Duration(30*time.Second), d.WallTime)
	require.EqualValues(t, 1<<30, d.MemoryBytes)
	require.EqualValues(t, 64, d.Processes)
	require.EqualValues(t, 1<<20, d.OutputBytes)
	require.Equal(t, 65534, d.UID)
	require.NoError(t, d.Validate())

	var c sandbox.Config
	require.NoError(t, yaml.Unmarshal([]byte("wall_time: 5s\nmemory_bytes: -1\nrequire: [userns, seccomp]\nread_only_paths: [/opt/tools]\n"), &c))
	require.Equal(t, sandbox.Duration(5*time.Second), c.WallTime)
	require.EqualValues(t, -1, c.MemoryBytes)
	require.Equal(t, []string{"userns", "seccomp"}, c.Require)
	require.NoError(t, c.WithDefaults().Validate())
	out, err := yaml.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(out), "wall_time: 5s")

	e, err := sandbox.New(sandbox.Config{Require: []string{"all"}})
	if err == nil {
		require.Equal(t, []string{sandbox.MechCgroup}, e.IsolationGaps(), `"all" requires everything but cgroup`)
		require.NoError(t, e.Close(t.Context()))
	} else {
		require.ErrorContains(t, err, "required isolation missing")
	}

	require.Error(t, yaml.Unmarshal([]byte("wall_time: 5\n"), &c), "durations are strings")
	for _, tt := range []struct {
		cfg  sandbox.Config
		want string
	}{
		{sandbox.Config{MemoryBytes: 1024}, "memory_bytes"},
		{sandbox.Config{OpenFiles: 3}, "open_files"},
		{sandbox.Config{TmpBytes: 10}, "tmp_bytes"},
		{sandbox.Config{WorkDir: "rel"}, "work_dir"},
		{sandbox.Config{ReadOnlyPaths: []string{"rel"}}, "read_only_paths"},
		{sandbox.Config{Require: []string{"magic"}}, `unknown mechanism "magic"`},
		{sandbox.Config{CPUSeconds: -1}, "cpu_seconds"},
		{sandbox.Config{HelperPool: sandbox.MaxHelperPool + 1}, "helper_pool"},
		{sandbox.Config{HelperPool: -2}, "helper_pool"},
	} {
		require.ErrorContains(t, tt.cfg.WithDefaults().Validate(), tt.want)
		_, err := sandbox.New(tt.cfg)
		require.ErrorContains(t, err, tt.want, "New validates")
	}
}
