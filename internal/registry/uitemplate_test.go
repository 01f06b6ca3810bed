package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
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
