package identity_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/identity"
)

// MaySeeCall is the one boundary of calls: the tenant first, then, under
// VisibilityOwn, the agent — unless the key holds the admin or approve
// scope ("*" holds both) or the installation scope.
func TestMaySeeCall(t *testing.T) {
	t.Parallel()
	bot := identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{"tools"}}
	approver := identity.Identity{Tenant: "acme", Agent: "alice", Scopes: []string{approvalflow.ApproveScope}}
	admin := identity.Identity{Tenant: "acme", Agent: "ops", Scopes: []string{identity.AdminScope}}
	star := identity.Identity{Tenant: "acme", Agent: "root", Scopes: []string{"*"}}
	install := identity.Identity{Tenant: "ops", Agent: "root", Scopes: []string{identity.InstallationScope}}
	for _, tt := range []struct {
		id                  identity.Identity
		tenant, agent       string
		wantTenant, wantOwn bool
	}{
		{bot, "acme", "bot", true, true},
		{bot, "acme", "other", true, false},
		{bot, "acme", "", true, false},
		{bot, "beta", "bot", false, false},
		{approver, "acme", "other", true, true},
		{admin, "acme", "other", true, true},
		{admin, "beta", "other", false, false},
		{star, "acme", "other", true, true},
		{star, "beta", "other", false, false},
		{install, "acme", "other", true, true},
		{bot, "", "bot", false, false},
	} {
		require.Equal(t, tt.wantTenant, tt.id.MaySeeCall(tt.tenant, tt.agent, identity.VisibilityTenant), "%v %s/%s tenant", tt.id, tt.tenant, tt.agent)
		require.Equal(t, tt.wantTenant, tt.id.MaySeeCall(tt.tenant, tt.agent, ""), "%v %s/%s default", tt.id, tt.tenant, tt.agent)
		require.Equal(t, tt.wantOwn, tt.id.MaySeeCall(tt.tenant, tt.agent, identity.VisibilityOwn), "%v %s/%s own", tt.id, tt.tenant, tt.agent)
	}
	require.NoError(t, identity.VisibilityOwn.Validate())
	require.NoError(t, identity.Visibility("").Validate())
	require.ErrorContains(t, identity.Visibility("agent").Validate(), `"agent"`)
}
