package limits_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/limits"
)

// The benchmarks measure, on the embedded server with in-process
// connections (an embedded dispatcher's case):
//
//   - the cost of each operation of the store, serial and with 64 callers
//     on one key (the per-tenant limit every call passes);
//   - the two mechanisms the issue asks to choose between, on the only
//     operation both can do (a budget): the KV compare-and-set of this
//     package, batched per key and unbatched, against a JetStream counter
//     stream (AllowMsgCounter, Nats-Incr: add, compare with the limit,
//     subtract again when over).
//
// Figures are in doc.go. Run:
//
//	go test ./internal/limits/ -run '^$' -bench . -benchmem -count 3 -timeout 10m

// inFlight is the callers of a parallel benchmark: 64, as the issue's
// cost proof.
const inFlight = 64

func parallel(b *testing.B, body func(pb *testing.PB)) {
	b.SetParallelism(max(inFlight/runtime.GOMAXPROCS(0), 1))
	b.RunParallel(body)
}

func reportStats(b *testing.B, stores ...*limits.Store) {
	var st limits.Stats
	for _, s := range stores {
		x := s.Stats()
		st.Requests += x.Requests
		st.Writes += x.Writes
		st.Batches += x.Batches
		st.Conflicts += x.Conflicts
		st.Reads += x.Reads
		st.Contention += x.Contention
		st.MostAttempts = max(st.MostAttempts, x.MostAttempts)
	}
	if st.Requests > 0 {
		b.ReportMetric(float64(st.Batches)/float64(st.Requests), "batches/op")
		b.ReportMetric(float64(st.Conflicts)/float64(st.Requests), "conflicts/op")
		b.ReportMetric(float64(st.Reads)/float64(st.Requests), "reads/op")
		b.ReportMetric(float64(st.Writes)/float64(st.Requests), "writes/op")
		b.ReportMetric(float64(st.Contention), "gave-up")
		b.ReportMetric(float64(st.MostAttempts), "most-attempts")
	}
}

func BenchmarkAllow(b *testing.B) {
	e := setup(b)
	r := limits.Rate{Count: 1 << 30, Per: time.Second, Burst: 1 << 20} // never refuses
	b.Run("serial", func(b *testing.B) {
		s, k := e.inProcess(b, limits.Config{}), key(b, "k")
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.Allow(b.Context(), k, r, 1, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
		reportStats(b, s)
	})
	b.Run("64-on-one-key", func(b *testing.B) {
		s, k := e.inProcess(b, limits.Config{}), key(b, "k")
		b.ReportAllocs()
		parallel(b, func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := s.Allow(b.Context(), k, r, 1, time.Now()); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportStats(b, s)
	})
	b.Run("64-refused", func(b *testing.B) {
		s, k := e.inProcess(b, limits.Config{}), key(b, "k")
		slow := limits.Rate{Count: 1, Per: time.Hour, Burst: 1}
		_, _, err := s.Allow(b.Context(), k, slow, 1, time.Now())
		require.NoError(b, err)
		b.ReportAllocs()
		parallel(b, func(pb *testing.PB) {
			for pb.Next() {
				if ok, _, err := s.Allow(b.Context(), k, slow, 1, time.Now()); err != nil || ok {
					b.Error(ok, err)
					return
				}
			}
		})
		reportStats(b, s)
	})
}

func BenchmarkAcquireRelease(b *testing.B) {
	e := setup(b)
	b.Run("serial", func(b *testing.B) {
		s, k := e.inProcess(b, limits.Config{}), key(b, "k")
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			id := "call-" + strconv.Itoa(i)
			ok, err := s.Acquire(b.Context(), k, 8, id, time.Minute, time.Now())
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			if err := s.Release(b.Context(), k, id); err != nil {
				b.Fatal(err)
			}
		}
		reportStats(b, s)
	})
	b.Run("64-on-one-key", func(b *testing.B) {
		s, k := e.inProcess(b, limits.Config{}), key(b, "k")
		var seq atomic.Int64
		b.ReportAllocs()
		parallel(b, func(pb *testing.PB) {
			for pb.Next() {
				id := "call-" + strconv.FormatInt(seq.Add(1), 10)
				if _, err := s.Acquire(b.Context(), k, inFlight, id, time.Minute, time.Now()); err != nil {
					b.Error(err)
					return
				}
				if err := s.Release(b.Context(), k, id); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportStats(b, s)
	})
}

func BenchmarkRepeat(b *testing.B) {
	e := setup(b)
	s := e.inProcess(b, limits.Config{})
	fp := fingerprint("tool{}")
	b.Run("serial", func(b *testing.B) {
		k := key(b, "session")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Repeat(b.Context(), k, fp, time.Minute, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("64-sessions", func(b *testing.B) {
		var seq atomic.Int64
		b.ReportAllocs()
		parallel(b, func(pb *testing.PB) {
			k := key(b, "session-"+strconv.FormatInt(seq.Add(1), 10))
			for pb.Next() {
				if _, err := s.Repeat(b.Context(), k, fp, time.Minute, time.Now()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// spender is one way to spend a unit of a budget.
type spender interface {
	spend(ctx context.Context, key string, limit int64) (bool, error)
}

// kvSpender is this package's Store.
type kvSpender struct{ s *limits.Store }

func (k kvSpender) spend(ctx context.Context, key string, limit int64) (bool, error) {
	ok, _, err := k.s.Spend(ctx, limits.Key{Tenant: "bench", Limit: "budget", Value: key}, 1, limits.Budget{Limit: limit, Window: time.Hour}, time.Now())
	return ok, err
}

// counterSpender is the alternative: a JetStream counter stream. One
// publish adds the unit and answers the new total; a total over the limit
// is subtracted again (a second publish) and refused. It cannot have
// per-key TTLs or discard-new (the server refuses both on a counter
// stream) nor a conditional increment, so it cannot do GCRA or a holder
// set, and a refusal writes twice.
type counterSpender struct {
	js      jetstream.JetStream
	subject string
}

func newCounterSpender(tb testing.TB, nc *nats.Conn, name string) counterSpender {
	js, err := jetstream.New(nc)
	require.NoError(tb, err)
	_, err = js.CreateOrUpdateStream(tb.Context(), jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, AllowMsgCounter: true, AllowDirect: true,
		MaxMsgsPerSubject: 1, Storage: jetstream.FileStorage, MaxBytes: 64 << 20,
	})
	require.NoError(tb, err)
	return counterSpender{js: js, subject: name + "."}
}

func (c counterSpender) add(ctx context.Context, key string, n string) (int64, error) {
	m := &nats.Msg{Subject: c.subject + key, Header: nats.Header{"Nats-Incr": []string{n}}}
	ack, err := c.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(ack.Value, 10, 64)
}

func (c counterSpender) spend(ctx context.Context, key string, limit int64) (bool, error) {
	total, err := c.add(ctx, key, "1")
	if err != nil {
		return false, err
	}
	if total <= limit {
		return true, nil
	}
	_, err = c.add(ctx, key, "-1")
	return false, err
}

// BenchmarkMechanism compares the KV compare-and-set store with a counter
// stream on a budget: admitted spends (limit never reached) and refused
// ones (limit reached), serial, with 64 callers on one key in one
// process, 4 processes × 16 callers on one key, and 64 callers on 64 keys.
func BenchmarkMechanism(b *testing.B) {
	e := setup(b)
	open := map[string]func(b *testing.B) []spender{
		"kv-cas-batched": func(b *testing.B) []spender {
			return []spender{kvSpender{e.inProcess(b, limits.Config{})}}
		},
		"kv-cas-nocache": func(b *testing.B) []spender {
			return []spender{kvSpender{e.inProcess(b, limits.Config{Cached: -1})}}
		},
		"kv-cas-unbatched": func(b *testing.B) []spender {
			return []spender{kvSpender{e.inProcess(b, limits.Config{MaxBatch: 1, MaxAttempts: 1000})}}
		},
		"counter": func(b *testing.B) []spender {
			nc, err := e.srv.Connect(b.Name())
			require.NoError(b, err)
			b.Cleanup(nc.Close)
			return []spender{newCounterSpender(b, nc, "CNT")}
		},
	}
	replicated := func(mk func(b *testing.B) []spender) func(b *testing.B) []spender {
		return func(b *testing.B) []spender {
			var all []spender
			for range 4 {
				all = append(all, mk(b)...)
			}
			return all
		}
	}
	for _, mech := range []string{"kv-cas-batched", "kv-cas-nocache", "kv-cas-unbatched", "counter"} {
		for _, sc := range []struct {
			name    string
			stores  func(b *testing.B) []spender
			limit   int64
			par     bool
			ownKeys bool
			sparse  bool
		}{
			{name: "admit/serial", stores: open[mech], limit: 1 << 60},
			{name: "admit/64-one-key", stores: open[mech], limit: 1 << 60, par: true},
			{name: "admit/4x16-one-key", stores: replicated(open[mech]), limit: 1 << 60, par: true},
			{name: "admit/64-own-keys", stores: open[mech], limit: 1 << 60, par: true, ownKeys: true},
			{name: "admit/64-sparse-keys", stores: open[mech], limit: 1 << 60, par: true, ownKeys: true, sparse: true},
			{name: "refuse/serial", stores: open[mech], limit: 1},
			{name: "refuse/64-one-key", stores: open[mech], limit: 1, par: true},
		} {
			b.Run(mech+"/"+sc.name, func(b *testing.B) {
				spenders := sc.stores(b)
				key := "k" + strconv.Itoa(time.Now().Nanosecond())
				if sc.limit == 1 {
					ok, err := spenders[0].spend(b.Context(), key, 1)
					require.NoError(b, err)
					require.True(b, ok)
				}
				b.ReportAllocs()
				defer func() {
					var stores []*limits.Store
					for _, s := range spenders {
						if k, ok := s.(kvSpender); ok {
							stores = append(stores, k.s)
						}
					}
					reportStats(b, stores...)
				}()
				if !sc.par {
					for b.Loop() {
						if ok, err := spenders[0].spend(b.Context(), key, sc.limit); err != nil || ok != (sc.limit > 1) {
							b.Fatal(ok, err)
						}
					}
					return
				}
				var (
					seq  atomic.Int64
					once sync.Once
				)
				parallel(b, func(pb *testing.PB) {
					n := seq.Add(1)
					s := spenders[int(n)%len(spenders)]
					k := key
					if sc.ownKeys {
						k = fmt.Sprintf("%s-%d", key, n)
					}
					var i int
					for pb.Next() {
						if sc.sparse { // 1024 keys in turn: each again after >10 ms
							i++
							k = fmt.Sprintf("%s-%d-%d", key, n, i%1024)
						}
						if ok, err := s.spend(b.Context(), k, sc.limit); err != nil || ok != (sc.limit > 1) {
							once.Do(func() { b.Error(ok, err) })
							return
						}
					}
				})
			})
		}
	}
}
