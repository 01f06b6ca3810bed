package dispatch

import (
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// toolView is the spec as ListTools and GetTool show it to id. Executor
// configuration (a sandbox tool's argv, environment and paths, an HTTP
// tool's URL and body templates, headers, allowed hosts and networks, an
// MCP tool's server, tool and definition hash) is for operators: it is
// shown to the admin scope only, and cleared (no config set, the executor
// type kept) for everyone else. A caller needs the name, docs, schemas,
// annotations and limits to call a tool, never how it runs.
func toolView(id Identity, spec *toolwirev1.ToolSpec) *toolwirev1.ToolSpec {
	if spec.GetConfig() == nil || registry.HasScopes(id.Scopes, []string{AdminScope}) {
		return spec
	}
	c := proto.CloneOf(spec)
	c.Config = nil
	return c
}
