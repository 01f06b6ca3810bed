package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// KVEntry is one key of a KV bucket as its stream's leader stores it.
type KVEntry struct {
	Value []byte
	// Revision is the entry's stream sequence: what kv.Update expects
	// to replace it.
	Revision uint64
	// Created is when the entry was stored.
	Created time.Time
}

// KVGetFromLeader reads key of bucket from the leader of the bucket's
// stream. kv.Get is a direct get, which any replica of a replicated bucket
// answers, also one that has not yet stored what the leader acknowledged:
// a decision that must see the latest write (is this version the one in
// force? is the document its record names stored?) reads the leader.
//
// A key never written, or whose latest entry is a delete, a purge or a
// TTL's end marker, is jetstream.ErrKeyNotFound; for such a delete or purge the returned
// entry (with the error) carries the marker's revision, so that a
// compare-and-set can replace it.
func KVGetFromLeader(ctx context.Context, nc *nats.Conn, bucket, key string) (*KVEntry, error) {
	subject := "$KV." + bucket + "." + key
	m, err := leaderLastMsg(ctx, nc, "KV_"+bucket, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("bus: %s: %w", key, jetstream.ErrKeyNotFound)
	}
	if err != nil {
		return nil, err
	}
	e := &KVEntry{Value: m.Data, Revision: m.Sequence, Created: m.Time}
	if m.Header.Get(kvOperationHeader) != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "" {
		// A delete or purge, or the marker the server writes when a
		// key's TTL ends (buckets with per-key TTLs).
		e.Value = nil
		return e, fmt.Errorf("bus: %s: %w", key, jetstream.ErrKeyNotFound)
	}
	return e, nil
}

// KVMatchFromLeader reads the one key of a bucket that matches filter (a
// key with wildcards) from the leader of the bucket's stream (stream,
// "KV_<bucket>"), as KVGetFromLeader reads a literal key: the subjects
// are resolved as LastMsgFromLeader resolves a filter, and the newest
// entry among them is taken. For a key known only by some of its tokens
// (a delegated call's key under a parent it names: internal/dispatch);
// what is not found is jetstream.ErrKeyNotFound, as a delete, a purge or
// a TTL's end marker is.
func KVMatchFromLeader(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, filter string) (*KVEntry, error) {
	bucket, ok := strings.CutPrefix(stream.CachedInfo().Config.Name, "KV_")
	if !ok {
		return nil, fmt.Errorf("bus: %s is not a KV bucket's stream", stream.CachedInfo().Config.Name)
	}
	m, err := LastMsgFromLeader(ctx, js, stream, "$KV."+bucket+"."+filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("bus: %s: %w", filter, jetstream.ErrKeyNotFound)
	}
	if err != nil {
		return nil, err
	}
	if m.Header.Get(kvOperationHeader) != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "" {
		return nil, fmt.Errorf("bus: %s: %w", filter, jetstream.ErrKeyNotFound)
	}
	return &KVEntry{Value: m.Data, Revision: m.Sequence, Created: m.Time}, nil
}

// KVKeysFromLeader returns the keys of a bucket that match filter (a key
// with wildcards, as kv.ListKeysFiltered takes) and hold a value (not a
// delete, a purge or a TTL's end marker), at most limit of them (none
// when limit is not positive), sorted, as the leader of the bucket's
// stream (stream, "KV_<bucket>") stores them. A key lister
// (kv.ListKeys) reads through an ordered consumer, which the server may
// place on any replica, also one that has not yet stored what the leader
// acknowledged: a decision that must see every key written before it (a
// cancel's cascade listing the children of a call) reads the leader. The
// subjects are resolved as LastMsgFromLeader resolves a filter, then
// each key's newest entry is read from the leader, one after another.
func KVKeysFromLeader(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, filter string, limit int) ([]string, error) {
	name := stream.CachedInfo().Config.Name
	bucket, ok := strings.CutPrefix(name, "KV_")
	if !ok {
		return nil, fmt.Errorf("bus: keys of %s: not a KV bucket's stream", name)
	}
	base := "$KV." + bucket + "."
	subjects, err := literalSubjects(ctx, js.Conn(), stream, base+filter, true)
	if err != nil {
		return nil, err
	}
	slices.Sort(subjects)
	var keys []string
	for _, subject := range subjects {
		if len(keys) >= limit {
			break
		}
		key := strings.TrimPrefix(subject, base)
		_, err := KVGetFromLeader(ctx, js.Conn(), bucket, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			continue // deleted, purged or expired since
		case err != nil:
			return nil, err
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// KVPutRollup stores value under key of bucket and removes every earlier
// revision of the key in the same write (a subject rollup), so the key
// holds one revision whatever the bucket's history: for values that are
// written again whole (a policy document's new layout) and must not pile
// up history in a shared bucket. It returns the new revision.
func KVPutRollup(ctx context.Context, js jetstream.JetStream, bucket, key string, value []byte) (uint64, error) {
	msg := nats.NewMsg("$KV." + bucket + "." + key)
	msg.Data = value
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return 0, fmt.Errorf("bus: put %s: %w", key, err)
	}
	return ack.Sequence, nil
}

// kvOperationHeader marks a KV delete or purge.
const kvOperationHeader = "KV-Operation"

// StoreFull reports whether err is a write refused for want of space:
// the stream or bucket holds its maximum bytes or messages (its discard
// policy is "new"), or the account's or the server's JetStream storage is
// used up. Every code is the pinned nats-server's
// (jetstream_errors_generated.go).
func StoreFull(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case jsErrStoreFailed:
		return strings.Contains(apiErr.Description, "maximum")
	case jsErrAccountResourcesExceeded, jsErrInsufficientResources, jsErrStorageResourcesExceeded, jsErrMemoryResourcesExceeded:
		return true
	}
	return false
}

// The server's error codes for a write refused for want of space.
const (
	// jsErrStoreFailed is "storage failed" (JSStreamStoreFailedF), which
	// carries "maximum bytes exceeded" and "maximum messages exceeded"
	// (and other failures, which are not about space).
	jsErrStoreFailed = 10077
	// jsErrAccountResourcesExceeded (JSAccountResourcesExceededErr): the
	// write would take the account past its JetStream storage limit.
	jsErrAccountResourcesExceeded = 10002
	// jsErrInsufficientResources (JSInsufficientResourcesErr): the
	// server's JetStream storage (max_file_store, max_memory_store) is
	// used up.
	jsErrInsufficientResources = 10023
	// jsErrStorageResourcesExceeded and jsErrMemoryResourcesExceeded
	// (JSStorageResourcesExceededErr, JSMemoryResourcesExceededErr): no
	// room left for a reservation on the server.
	jsErrStorageResourcesExceeded = 10047
	jsErrMemoryResourcesExceeded  = 10028
)
