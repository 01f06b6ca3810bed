package dispatch

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// scopes is the visibility step: the caller holds all of the tool's
// scopes (PERMISSION_DENIED naming them otherwise).
func (a *admission) scopes(_ context.Context) verdict {
	if registry.HasScopes(a.id.Scopes, a.spec.Scopes) {
		return next
	}
	return a.refused(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
		fmt.Sprintf("tool %q needs scopes %s", a.spec.Name, strings.Join(a.spec.Scopes, ", "))), nil)
}
