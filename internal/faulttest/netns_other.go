//go:build !linux

package faulttest

import (
	"errors"
	"fmt"
)

// inNetns: network namespaces are Linux's.
func inNetns(name string, _ func() error) error {
	return fmt.Errorf("namespace %s: %w", name, errors.ErrUnsupported)
}
