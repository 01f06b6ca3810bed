package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// VersionKey is the bucket key of one version of a tool.
func VersionKey(name, version string) string { return "versions." + name + "." + version }

// Publish checks, stamps and writes specs into the registry bucket: the
// version key of each, and the tool's current key when it changed. It
// returns the stamped specs. It writes directly, with no claim and no
// announcement checks: for a connection with the dispatcher's
// permissions (tests, tooling); workers announce through a Writer.
func Publish(ctx context.Context, kv jetstream.KeyValue, specs []*toolwirev1.ToolSpec) ([]*toolwirev1.ToolSpec, error) {
	return publish(ctx, kv, specs, true)
}

// PublishVersions is Publish without moving any tool's current version:
// shadow pools make their versions known for replays this way.
func PublishVersions(ctx context.Context, kv jetstream.KeyValue, specs []*toolwirev1.ToolSpec) ([]*toolwirev1.ToolSpec, error) {
	return publish(ctx, kv, specs, false)
}

func publish(ctx context.Context, kv jetstream.KeyValue, specs []*toolwirev1.ToolSpec, current bool) ([]*toolwirev1.ToolSpec, error) {
	out := make([]*toolwirev1.ToolSpec, 0, len(specs))
	for _, spec := range specs {
		if err := Check(spec); err != nil {
			return nil, err
		}
		s := Stamp(spec)
		b, err := proto.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("registry: marshal %s: %w", s.Name, err)
		}
		if _, err := kv.Put(ctx, VersionKey(s.Name, s.Version), b); err != nil {
			return nil, fmt.Errorf("registry: put %s version: %w", s.Name, err)
		}
		if !current {
			out = append(out, s)
			continue
		}
		cur, err := kv.Get(ctx, s.Name)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("registry: get %s: %w", s.Name, err)
		default:
			var old toolwirev1.ToolSpec
			if proto.Unmarshal(cur.Value(), &old) == nil && old.Version == s.Version && old.Disabled == s.Disabled {
				out = append(out, s)
				continue
			}
		}
		if _, err := kv.Put(ctx, s.Name, b); err != nil {
			return nil, fmt.Errorf("registry: put %s: %w", s.Name, err)
		}
		out = append(out, s)
	}
	return out, nil
}
