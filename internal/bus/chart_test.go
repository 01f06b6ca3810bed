package bus_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
)

// The Helm chart's bundled NATS grants the roles (a pool's role for each
// entry of pools[]) the same permissions as RolePermissions: the chart's
// lists cannot drift from the code's.
func TestChartPermissionsMatch(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/helm/toolwire/templates/_nats_permissions.tpl")
	require.NoError(t, err)
	tpl := strings.NewReplacer("{{ $p }}", "tw-x", "{{ $u }}", "TW_X", "{{ $n }}", "some-pool").Replace(string(b))
	quoted := regexp.MustCompile(`"([^"]+)"`)
	for role, define := range map[string]string{bus.RoleWorker: "toolwire.natsWorkerPermissions", bus.RoleOperator: "toolwire.natsOperatorPermissions",
		bus.PoolRole("some-pool"): "toolwire.natsPoolPermissions"} {
		start := strings.Index(tpl, `define "`+define+`"`)
		require.GreaterOrEqual(t, start, 0, define)
		block := tpl[start:]
		block = block[:strings.Index(block, "{{- end }}")]
		pubAt, subAt := strings.Index(block, "publish:"), strings.Index(block, "subscribe:")
		require.True(t, pubAt > 0 && subAt > pubAt, define)
		list := func(s string) []string {
			var out []string
			for _, m := range quoted.FindAllStringSubmatch(s, -1) {
				out = append(out, m[1])
			}
			slices.Sort(out)
			return out
		}
		want, err := bus.RolePermissions(bus.Config{Prefix: "tw-x"}, role)
		require.NoError(t, err)
		slices.Sort(want.Publish)
		slices.Sort(want.Subscribe)
		require.Equal(t, want.Publish, list(block[pubAt:subAt]), "%s publish", role)
		require.Equal(t, want.Subscribe, list(block[subAt:]), "%s subscribe", role)
	}
}
