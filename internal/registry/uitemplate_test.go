package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A spec's ui_template is a ui:// URI of printable ASCII, at most 2048
// bytes; anything else is refused by Check, naming the field.
func TestUITemplateIsChecked(t *testing.T) {
	t.Parallel()
	spec := func(uri string) error {
		tl := tool.Must(tool.New("w", func(context.Context, struct{}) (string, error) { return "", nil },
			tool.WithUITemplate(uri)))
		return registry.Check(tl.Spec())
	}
	require.NoError(t, spec(""))
	require.NoError(t, spec("ui://widget/pizza.html"))
	for _, bad := range []string{"https://x/y.html", "ui://", "ui://a b", "ui://" + strings.Repeat("a", 2044), "ui://\u00e9"} {
		require.ErrorContains(t, spec(bad), "ui_template", bad)
	}
}

// A tool does not write openai/outputTemplate in its spec's meta: the
// widget template is its checked ui_template, which a profile renders in
// the client's keys. Other keys pass; a refused ui_template is not echoed
// whole.
func TestSpecMetaDoesNotWriteTheTemplate(t *testing.T) {
	t.Parallel()
	check := func(meta string) error {
		tl := tool.Must(tool.New("w", func(context.Context, struct{}) (string, error) { return "", nil },
			func(s *toolwirev1.ToolSpec) { s.MetaJson = meta }))
		return registry.Check(tl.Spec())
	}
	require.ErrorContains(t, check(`{"openai/outputTemplate":"https://evil.example/x.html"}`), "openai/outputTemplate")
	require.NoError(t, check(`{"openai/widgetDescription":"d","acme.example/k":1}`))
	require.NoError(t, check(""))

	tl := tool.Must(tool.New("w", func(context.Context, struct{}) (string, error) { return "", nil },
		tool.WithUITemplate("ui://"+strings.Repeat("a b", 2000))))
	err := registry.Check(tl.Spec())
	require.ErrorContains(t, err, "ui_template")
	require.Less(t, len(err.Error()), 300)
}
