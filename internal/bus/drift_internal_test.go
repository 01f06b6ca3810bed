package bus

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// drift never panics, whatever it is given, and names what differs.
func TestDriftOfAnything(t *testing.T) {
	t.Parallel()
	var none *jetstream.StreamConfig
	a := jetstream.StreamConfig{Name: "S", MaxBytes: 1, MaxAge: time.Hour, Subjects: nil, Metadata: map[string]string{"_nats.ver": "1"}}
	b := jetstream.StreamConfig{Name: "S", MaxBytes: 2, MaxAge: time.Hour, Subjects: []string{}, Metadata: map[string]string{"_nats.ver": "2"}}
	require.Equal(t, []string{"max_bytes: 1 → 2"}, drift(&a, b))
	require.Empty(t, drift(&a, none))
	require.Empty(t, drift(nil, &a))
	require.Empty(t, drift(&a, &jetstream.ConsumerConfig{}))
	require.Empty(t, drift(1, 2))
}
