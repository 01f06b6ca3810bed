package limits

import (
	"cmp"
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
)

// BucketConfig is the layout of the limits bucket.
type BucketConfig struct {
	// Name is the KV bucket. Required (the bus layout gives it, with the
	// installation's prefix).
	Name string
	// Replicas is the bucket's replica count. Default 1.
	Replicas int
	// MaxBytes bounds the bucket. Default 64 MiB; -1 = unbounded. When it
	// is full, writes are refused (discard new): admissions answer an
	// error rather than forget what was counted.
	MaxBytes int64
	// Storage is file (default) or memory. Memory is faster and loses
	// every count when the server restarts.
	Storage jetstream.StorageType
}

// DefaultBucketMaxBytes is BucketConfig.MaxBytes when left 0.
const DefaultBucketMaxBytes = 64 << 20

// MaxValueBytes bounds a stored value (the bucket's MaxValueSize): the
// largest is a concurrency key at MaxConcurrency holders.
const MaxValueBytes = 1 + MaxConcurrency*holderBytes

// headerBytes is room for the headers of a write (the expected revision
// and the TTL), which the server counts in a message's size.
const headerBytes = 256

func (c BucketConfig) withDefaults() BucketConfig {
	c.Replicas = cmp.Or(c.Replicas, 1)
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultBucketMaxBytes)
	return c
}

func (c BucketConfig) validate() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("%w: BucketConfig.Name is empty", ErrInvalid)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("%w: BucketConfig.Replicas %d not in 1..5", ErrInvalid, c.Replicas)
	case c.MaxBytes < -1 || c.MaxBytes == 0:
		return fmt.Errorf("%w: BucketConfig.MaxBytes %d", ErrInvalid, c.MaxBytes)
	case c.MaxBytes > 0 && c.MaxBytes < MaxValueBytes*4:
		return fmt.Errorf("%w: BucketConfig.MaxBytes %d is below four of the largest value (%d)", ErrInvalid, c.MaxBytes, MaxValueBytes)
	}
	return nil
}

// EnsureBucket creates the limits bucket, or updates it to cfg, and
// returns it: the configuration of the bus layout (bus.LimitsKeyValueConfig;
// a dispatcher's bus.Open makes it as bus.Bus.Limits). For stores outside
// a bus layout (tests). Idempotent.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, cfg BucketConfig) (jetstream.KeyValue, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	kc := bus.LimitsKeyValueConfig(cfg.Name, cfg.Replicas, cfg.MaxBytes)
	if cfg.Storage != jetstream.FileStorage {
		kc.Storage = cfg.Storage
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, kc)
	if err != nil {
		return nil, fmt.Errorf("limits: bucket %s: %w", cfg.Name, err)
	}
	return kv, nil
}
