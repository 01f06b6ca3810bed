package registry_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/skills"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// The `skill` tool's manifests are checked where a worker announces
// them, through a dispatcher's announcement service (a worker process)
// and the Registrar in process alike: a manifest with a tampered file
// digest is refused even when the spec's version is stamped to match,
// and so are skills on another tool; nothing is written, and the honest
// spec is accepted.
func TestForgedSkillManifestsAreRefusedOnAnnounce(t *testing.T) {
	t.Parallel()
	e := startAnnounce(t)
	ctx, kv := t.Context(), e.bus.Registry
	dir := t.TempDir()
	skill := filepath.Join(dir, "pdf", "SKILL.md")
	require.NoError(t, os.MkdirAll(filepath.Dir(skill), 0o755))
	require.NoError(t, os.WriteFile(skill, []byte("---\nname: pdf\ndescription: Fills PDF forms.\n---\nSteps.\n"), 0o600))
	set, err := skills.Load(ctx, []string{dir})
	require.NoError(t, err)
	tl, err := skills.Tool(set)
	require.NoError(t, err)
	honest := registry.Stamp(tl.Spec())

	tampered := proto.CloneOf(honest)
	tampered.Skills[0].Files[0].Sha256 = strings.Repeat("0", 64)
	tampered = registry.Stamp(tampered) // the spec's own version is right
	renamed := proto.CloneOf(honest)
	renamed.Name = "search"
	renamed = registry.Stamp(renamed)

	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	for _, w := range []registry.PoolWriter{
		e.worker(t, "native", native),
		{Writer: registry.NewRegistrar(e.bus, slog.New(slog.DiscardHandler), nil, ""), Pool: "native", Type: native, Worker: "in-process"},
	} {
		for _, op := range []bool{false, true} { // current, and shadow versions
			err := w.Publish(ctx, []*toolwirev1.ToolSpec{tampered}, op)
			require.ErrorIs(t, err, registry.ErrRefused)
			require.ErrorContains(t, err, "is not the digest of its files")
			err = w.Publish(ctx, []*toolwirev1.ToolSpec{renamed}, op)
			require.ErrorIs(t, err, registry.ErrRefused)
			require.ErrorContains(t, err, `only the native tool "skill" carries skills`)
		}
		require.ErrorIs(t, w.Claim(ctx, tampered), registry.ErrRefused)
		for _, name := range []string{skills.ToolName, "search"} {
			_, err := kv.Get(ctx, name)
			require.Error(t, err, "nothing is written for %s", name)
		}
	}

	require.NoError(t, e.worker(t, "native", native).Publish(ctx, []*toolwirev1.ToolSpec{honest}, false))
	cur, err := kv.Get(ctx, skills.ToolName)
	require.NoError(t, err)
	var stored toolwirev1.ToolSpec
	require.NoError(t, proto.Unmarshal(cur.Value(), &stored))
	require.Equal(t, honest.Version, stored.Version)
	require.Len(t, stored.Skills, 1)
}
