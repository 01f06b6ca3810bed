package replay_test

import (
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func registryVersion(s *toolwirev1.ToolSpec) string { return registry.Version(s) }
