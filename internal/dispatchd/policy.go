package dispatchd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// PolicyError is a --policy file the dispatcher refused to start with: it
// cannot be read, does not parse, or its tests fail. Its message names the
// file and every problem's line.
type PolicyError struct {
	File string
	Err  error
}

func (e *PolicyError) Error() string { return fmt.Sprintf("--policy %s: %v", e.File, e.Err) }
func (e *PolicyError) Unwrap() error { return e.Err }

// readPolicyFile reads and parses the --policy file before anything
// starts, so that a document with a syntax or condition error is refused
// at once; its tests run when it is applied (they need the registry).
// nil without a file.
func readPolicyFile(file string) ([]byte, error) {
	if file == "" {
		return nil, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, &PolicyError{File: file, Err: err}
	}
	defer f.Close()
	// One byte over the bound, so that Parse refuses an oversized file.
	src, err := io.ReadAll(io.LimitReader(f, policy.MaxDocumentBytes+1))
	if err != nil {
		return nil, &PolicyError{File: file, Err: err}
	}
	if _, err := policy.Parse(src); err != nil {
		return nil, &PolicyError{File: file, Err: err}
	}
	return src, nil
}

// policyFile is the --policy file to apply: its path and contents, the
// layout and the registry its tools are checked against.
type policyFile struct {
	b    *bus.Bus
	reg  *registry.Store
	path string
	doc  []byte
}

// applyPolicyFile applies src, the --policy file, as the installation
// document, its tests seeing the registry's specs.
func applyPolicyFile(ctx context.Context, f policyFile, log *slog.Logger) error {
	b, reg, file, src := f.b, f.reg, f.path, f.doc
	lookup := func(name string) *toolwirev1.ToolSpec {
		e, err := reg.Get(name)
		if err != nil {
			return nil
		}
		return e.Spec
	}
	res, err := policystore.NewStore(b, log).Apply(ctx, policystore.Installation, src,
		policystore.ApplyOptions{AppliedBy: "--policy", Comment: "--policy " + filepath.Base(file), Lookup: lookup})
	if errors.Is(err, policy.ErrInvalid) || errors.Is(err, policy.ErrTestsFailed) {
		return &PolicyError{File: file, Err: err}
	}
	if err != nil {
		return fmt.Errorf("--policy %s: %w", file, err)
	}
	log.Info("installation policy", "file", file, "version", res.Version.Version, "changed", res.Changed,
		"rules", res.Version.Rules, "tests", res.TestsPassed)
	return nil
}
