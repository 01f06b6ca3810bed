package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Settings that differ between the live server and the configuration.
//
// Open creates or updates every stream and bucket from Config, and
// EnsurePool every pool consumer from its PoolConfig: the configuration
// wins, so an operator's edit on the server (nats stream edit) is put
// back at the next start. It is never put back silently: Open reads each
// store's settings before it updates them, and logs every setting the
// update changed, with the live value and the configured one. To change a
// setting for good, change the configuration (the dispatcher's flags).

// liveStream returns the live configuration of stream name, or nil when
// it does not exist or cannot be read (the update reports real errors).
func (b *Bus) liveStream(ctx context.Context, name string) *jetstream.StreamConfig {
	st, err := b.JS.Stream(ctx, name)
	if err != nil {
		return nil
	}
	cfg := st.CachedInfo().Config
	return &cfg
}

// logDrift logs the settings of a stream or consumer that differ between
// before (the live server's) and after (what the configuration made of
// them); nothing when before is nil (just created) or nothing changed.
func (b *Bus) logDrift(ctx context.Context, kind, name string, before, after any) {
	if rv := reflect.ValueOf(before); !rv.IsValid() || rv.Kind() == reflect.Pointer && rv.IsNil() {
		return
	}
	diffs := drift(before, after)
	if len(diffs) == 0 {
		return
	}
	b.log.WarnContext(ctx, kind+" settings on the server differed from the configuration; the configuration is applied",
		kind, name, "changed", strings.Join(diffs, "; "))
}

// drift lists the fields of two values of one struct type (or pointers to
// it) that differ, as "json_name: live → configured". Empty and absent
// lists and maps are equal, and metadata the server keeps for itself
// (keys starting "_nats.") is left out.
func drift(before, after any) []string {
	bv, av := reflect.Indirect(reflect.ValueOf(before)), reflect.Indirect(reflect.ValueOf(after))
	if !bv.IsValid() || !av.IsValid() || bv.Type() != av.Type() || bv.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	t := bv.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = f.Name
		}
		x, y := bv.Field(i).Interface(), av.Field(i).Interface()
		if m, ok := x.(map[string]string); ok {
			x, y = ownMetadata(m), ownMetadata(y.(map[string]string))
		}
		if sameSetting(x, y) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s → %s", name, render(x), render(y)))
	}
	return out
}

func sameSetting(x, y any) bool {
	xv, yv := reflect.ValueOf(x), reflect.ValueOf(y)
	switch xv.Kind() {
	case reflect.Slice, reflect.Map:
		if xv.Len() == 0 && yv.Len() == 0 {
			return true
		}
	}
	return reflect.DeepEqual(x, y)
}

// withoutPause is m without a pause record's keys.
func withoutPause(m map[string]string) map[string]string {
	out := maps.Clone(m)
	delete(out, PoolPausedByKey)
	delete(out, PoolPausedAtKey)
	delete(out, PoolPausedReasonKey)
	return out
}

// ownMetadata is m without the server's own keys.
func ownMetadata(m map[string]string) map[string]string {
	own := maps.Clone(m)
	maps.DeleteFunc(own, func(k, _ string) bool { return strings.HasPrefix(k, "_nats.") })
	return own
}

func render(v any) string {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return "none" // a nil *time.Time is a Stringer that panics
	}
	switch x := v.(type) {
	case time.Duration:
		return x.String()
	case fmt.Stringer:
		return x.String()
	case string:
		return fmt.Sprintf("%q", x)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Struct:
		if rv.Kind() == reflect.Pointer && rv.IsNil() {
			return "none"
		}
		data, err := json.Marshal(v)
		if err == nil {
			return string(data)
		}
	}
	return fmt.Sprint(v)
}

// PoolDrift lists how a pool's live consumer configuration differs from
// declared, the configuration EnsurePool made (the server's answer to
// it), each setting as "json_name: live → declared"; nil when they agree.
// A declared filter the live consumer lacks is a difference; a filter it
// has besides is not (filters only grow: another replica's tools).
func PoolDrift(live, declared jetstream.ConsumerConfig) []string {
	have := ConsumerFilters(live)
	var missing []string
	for _, f := range ConsumerFilters(declared) {
		if !slices.Contains(have, f) {
			missing = append(missing, f)
		}
	}
	live.FilterSubject, live.FilterSubjects, declared.FilterSubject, declared.FilterSubjects = "", nil, "", nil
	// A pause is checked against its record (pauseDrift), not against a
	// declaration.
	live.PauseUntil, declared.PauseUntil = nil, nil
	live.Metadata, declared.Metadata = withoutPause(live.Metadata), withoutPause(declared.Metadata)
	out := drift(&live, &declared)
	if len(missing) > 0 {
		out = append(out, "filter_subjects: missing "+strings.Join(missing, ", "))
	}
	return out
}
