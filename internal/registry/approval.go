package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ApprovalPrefix starts the bucket keys of approved tool definitions; the
// Store ignores them.
const ApprovalPrefix = "approvals."

// ApprovalKey is the bucket key holding the approved definition hash of a
// tool whose definition comes from outside (an MCP server's tool).
func ApprovalKey(name string) string { return ApprovalPrefix + name }

// Approved returns the definition hash approved for name, and false when
// none has been recorded.
func Approved(ctx context.Context, kv jetstream.KeyValue, name string) (string, bool, error) {
	e, err := kv.Get(ctx, ApprovalKey(name))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("registry: approval of %s: %w", name, err)
	case e.Operation() != jetstream.KeyValuePut:
		return "", false, nil
	}
	return string(e.Value()), true, nil
}

// Approve records hash as the approved definition of name.
func Approve(ctx context.Context, kv jetstream.KeyValue, name, hash string) error {
	if hash == "" {
		return errors.New("registry: approve: empty definition hash")
	}
	if _, err := kv.Put(ctx, ApprovalKey(name), []byte(hash)); err != nil {
		return fmt.Errorf("registry: approve %s: %w", name, err)
	}
	return nil
}

// ApproveFirst records hash as the approved definition of name unless one
// is already recorded (trust on first use), and returns the approved hash.
func ApproveFirst(ctx context.Context, kv jetstream.KeyValue, name, hash string) (string, error) {
	if _, err := kv.Create(ctx, ApprovalKey(name), []byte(hash)); err == nil {
		return hash, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return "", fmt.Errorf("registry: approve %s: %w", name, err)
	}
	got, ok, err := Approved(ctx, kv, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return ApproveFirst(ctx, kv, name, hash)
	}
	return got, nil
}
