package workerconfig_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/workerconfig"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// A worker configuration's skills directories (relative to the file)
// become one native tool, `skill`, with the skills' manifests; a skill
// that breaks a rule stops the worker from being built, naming it; an
// empty entry is refused by the file's validation, as are skills without
// a native pool (by NewWorker too).
func TestSkillsConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	skill := filepath.Join(dir, "skills", "pdf", "SKILL.md")
	require.NoError(t, os.MkdirAll(filepath.Dir(skill), 0o755))
	require.NoError(t, os.WriteFile(skill, []byte("---\nname: pdf\ndescription: Fills PDF forms.\n---\nSteps.\n"), 0o600))
	cfg := filepath.Join(dir, "worker.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("skills: [skills]\n"), 0o600))
	f, err := workerconfig.Load(cfg)
	require.NoError(t, err)
	env := bustest.Start(t, bus.Config{})
	build := func() (*workerconfig.Worker, error) {
		return workerconfig.NewWorker(t.Context(), env.Bus, f, workerconfig.Options{Logger: slog.New(slog.DiscardHandler),
			Registry: registry.NewRegistrar(env.Bus, nil, nil, "")})
	}
	w, err := build()
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	kv, err := env.Bus.Registry.Get(t.Context(), "skill") // published by Start
	require.NoError(t, err)
	spec := &toolwirev1.ToolSpec{}
	require.NoError(t, proto.Unmarshal(kv.Value(), spec))
	require.Len(t, spec.Skills, 1)
	require.Equal(t, "pdf", spec.Skills[0].Name)
	require.Contains(t, spec.Description, "- pdf: Fills PDF forms.")
	require.NoError(t, w.Stop(t.Context()))

	require.NoError(t, os.WriteFile(skill, []byte("---\nname: docx\ndescription: Fills PDF forms.\n---\nSteps.\n"), 0o600))
	_, err = build()
	require.ErrorContains(t, err, "skill pdf: SKILL.md: name \"docx\" is not the directory's name pdf")

	_, err = workerconfig.Parse([]byte("skills: ['']\n"))
	require.ErrorContains(t, err, "skills[0] is empty")

	// `skill` is a native tool: skills without a native pool would be
	// loaded and silently not served, so they are refused, by the file's
	// validation and by NewWorker (pools narrowed by flags, best effort
	// or not).
	_, err = workerconfig.Parse([]byte("pools: [{type: http}]\nskills: [skills]\n"))
	require.ErrorContains(t, err, "skills: served by the native tool skill, but pools has no native pool")
	_, err = workerconfig.Parse([]byte("pools: [{type: http}, {type: native}]\nskills: [skills]\n"))
	require.NoError(t, err)
	for _, best := range []bool{false, true} {
		_, err = workerconfig.NewWorker(t.Context(), env.Bus, f, workerconfig.Options{Logger: slog.New(slog.DiscardHandler),
			Registry: registry.NewRegistrar(env.Bus, nil, nil, ""), PoolTypes: []string{"http"}, BestEffort: best})
		require.ErrorContains(t, err, "this worker serves no native pool")
	}
}
