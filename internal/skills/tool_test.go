package skills_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/skills"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The `skill` tool lists every skill in its description (and has no
// summary, which the exports would show instead),
// carries the manifests in its spec, and returns a skill's instructions
// and file list, a text file as a text resource, a binary one as a blob,
// and NOT_FOUND for an unknown skill or file.
func TestTool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"pdf/SKILL.md":        skillMD("pdf", "# PDF\n"),
		"pdf/scripts/fill.py": "print(1)\n",
		"pdf/logo.bin":        "\xff\x00",
		"docx/SKILL.md":       skillMD("docx", "# DOCX\n"),
	})
	set, err := skills.Load(t.Context(), []string{dir})
	require.NoError(t, err)
	tl, err := skills.Tool(set)
	require.NoError(t, err)
	spec := tl.Spec()
	require.Equal(t, skills.ToolName, spec.Name)
	require.Contains(t, spec.Description, "- docx: Does docx things. Use it for docx.\n- pdf: Does pdf things.")
	require.Empty(t, spec.Summary, "the exports show the description, which lists the skills")
	require.Len(t, spec.Skills, 2)
	require.True(t, spec.GetAnnotations().GetReadOnly())

	r, err := tl.Invoke(t.Context(), []byte(`{"name":"pdf"}`))
	require.NoError(t, err)
	require.Equal(t, "# PDF\n", r.Content[0].GetText().GetText())
	require.Contains(t, r.Content[1].GetText().GetText(), "- scripts/fill.py (text/x-python, 9 bytes)")

	r, err = tl.Invoke(t.Context(), []byte(`{"name":"pdf","resource":"scripts/fill.py"}`))
	require.NoError(t, err)
	res := r.Content[0].GetResource()
	require.Equal(t, "skill://pdf/scripts/fill.py", res.GetUri())
	require.Equal(t, "print(1)\n", res.GetText())
	r, err = tl.Invoke(t.Context(), []byte(`{"name":"pdf","resource":"logo.bin"}`))
	require.NoError(t, err)
	require.Equal(t, []byte("\xff\x00"), r.Content[0].GetResource().GetBlob())

	for _, args := range []string{`{"name":"xlsx"}`, `{"name":"pdf","resource":"../docx/SKILL.md"}`, `{"name":"pdf","resource":"nope.md"}`} {
		_, err = tl.Invoke(t.Context(), []byte(args))
		var te *tool.Error
		require.True(t, errors.As(err, &te), args)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, te.Type, args)
	}
}
