package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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

// ApproverPrefix starts the bucket keys that say who approved a tool's
// definition (RecordApprover); the Store ignores them. Workers read the
// approval itself (ApprovalKey), never these.
const ApproverPrefix = "approvers."

// Approver is who approved a definition of a tool, and when.
type Approver struct {
	Hash string    `json:"hash"`
	By   string    `json:"by"` // tenant/agent of the key that approved
	At   time.Time `json:"at"`
}

// RecordApprover records who approved a definition of name (after
// Approve): the registry's record of the approval's author.
func RecordApprover(ctx context.Context, kv jetstream.KeyValue, name string, a Approver) error {
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("registry: approver of %s: %w", name, err)
	}
	if _, err := kv.Put(ctx, ApproverPrefix+name, b); err != nil {
		return fmt.Errorf("registry: approver of %s: %w", name, err)
	}
	return nil
}

// ApprovedBy returns who last approved a definition of name, and false
// when no one is recorded (approved before approvers were recorded, or
// trusted on first use).
func ApprovedBy(ctx context.Context, kv jetstream.KeyValue, name string) (Approver, bool, error) {
	e, err := kv.Get(ctx, ApproverPrefix+name)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return Approver{}, false, nil
	case err != nil:
		return Approver{}, false, fmt.Errorf("registry: approver of %s: %w", name, err)
	case e.Operation() != jetstream.KeyValuePut:
		return Approver{}, false, nil
	}
	var a Approver
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		return Approver{}, false, fmt.Errorf("registry: approver of %s: %w", name, err)
	}
	return a, true, nil
}
