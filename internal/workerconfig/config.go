package workerconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/configvalue"
	"github.com/toolwire/toolwire/internal/executors/httpexec"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"sigs.k8s.io/yaml"
)

// File is a worker's YAML configuration (worker --config FILE). Every
// section is optional.
type File struct {
	// Pools served. Default one pool of every type that has something to
	// serve: native when the binary has native tools, sandbox and http
	// when spec files declare such tools, mcp when servers are listed.
	Pools []PoolFile `json:"pools,omitempty"`
	// Tools are spec files or directories of spec files (*.yaml, *.yml,
	// *.json; see internal/specfile) declaring sandbox and HTTP tools.
	// Relative paths are relative to the configuration file.
	Tools []string `json:"tools,omitempty"`
	// Vars are the values of ${NAME} in spec files; for a name not listed
	// here, the environment variable of that name if it starts with
	// TOOLWIRE_VAR_ (specs are published: never put a secret in one).
	Vars map[string]string `json:"vars,omitempty"`
	// Sandbox configures the sandbox executor (defaults and limits).
	Sandbox sandbox.Config `json:"sandbox,omitempty"`
	// HTTP configures the HTTP executor (timeouts, SSRF allowances).
	HTTP httpexec.Config `json:"http,omitempty"`
	// MCP lists the MCP servers whose tools this worker serves.
	MCP mcp.Config `json:"mcp,omitempty"`
	// Skills are directories of skills (each a directory with a SKILL.md
	// and its resources; internal/skills), served by one native tool,
	// `skill`, which needs a native pool. Relative paths are relative to
	// the configuration file. Default none: no `skill` tool.
	Skills []string `json:"skills,omitempty"`

	// dir is the directory relative tool paths resolve against.
	dir string
}

// PoolFile is one pool of a File.
type PoolFile struct {
	// Type is native, mcp, sandbox or http.
	Type string `json:"type"`
	// Name of the pool (its durable consumer); replicas serving the same
	// tools share it. Default the type.
	Name string `json:"name,omitempty"`
	// Concurrency is how many calls run at once. Default 64 (native,
	// http, mcp) or the number of CPUs × 2 (sandbox).
	Concurrency int `json:"concurrency,omitempty"`
	// AckWait of the pool consumer. Default 30s.
	AckWait configvalue.Duration `json:"ack_wait,omitempty"`
	// MaxDeliver of the pool consumer. Default 5.
	MaxDeliver int `json:"max_deliver,omitempty"`
}

// Load reads a configuration file. Unknown fields are errors.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("workerconfig: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("workerconfig: %s: %w", path, err)
	}
	f.dir = filepath.Dir(path)
	return f, nil
}

// Parse decodes a configuration. Unknown fields are errors.
func Parse(b []byte) (*File, error) {
	f := &File{}
	if err := yaml.UnmarshalStrict(b, f); err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// Validate reports every invalid field, joined.
func (f *File) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, p := range f.Pools {
		if _, ok := bus.ParseType(p.Type); !ok {
			errs = append(errs, fmt.Errorf("pools[%d].type %q: want native, mcp, sandbox or http", i, p.Type))
			continue
		}
		if seen["type:"+p.Type] {
			errs = append(errs, fmt.Errorf("pools[%d]: a second %s pool; a worker serves each type with one pool (run another worker for another)", i, p.Type))
		}
		seen["type:"+p.Type] = true
		name := p.Name
		if name == "" {
			name = p.Type
		}
		if seen[name] {
			errs = append(errs, fmt.Errorf("pools[%d]: pool %q listed twice", i, name))
		}
		seen[name] = true
		if p.Concurrency < 0 || p.MaxDeliver < -1 || time.Duration(p.AckWait) < 0 {
			errs = append(errs, fmt.Errorf("pools[%d]: concurrency, max_deliver and ack_wait must not be negative", i))
		}
	}
	for i, t := range f.Tools {
		if strings.TrimSpace(t) == "" {
			errs = append(errs, fmt.Errorf("tools[%d] is empty", i))
		}
	}
	for i, d := range f.Skills {
		if strings.TrimSpace(d) == "" {
			errs = append(errs, fmt.Errorf("skills[%d] is empty", i))
		}
	}
	if len(f.Skills) > 0 && len(f.Pools) > 0 && !slices.ContainsFunc(f.Pools, func(p PoolFile) bool {
		t, _ := bus.ParseType(p.Type)
		return t == toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	}) {
		// `skill` is a native tool, published only with a native pool.
		errs = append(errs, errors.New("skills: served by the native tool skill, but pools has no native pool"))
	}
	if err := f.Sandbox.WithDefaults().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("sandbox: %w", err))
	}
	if err := f.HTTP.WithDefaults().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("http: %w", err))
	}
	if len(f.MCP.Servers) > 0 {
		if err := f.MCP.WithDefaults().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("mcp: %w", err))
		}
	}
	return errors.Join(errs...)
}
