package archive_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/signing"
)

// writeChain seals segments of n messages each on stream in b, the
// messages one second apart from t0, and returns the messages.
func writeChain(t *testing.T, b *blob.Bucket, stream string, segments, n int) []*archive.Message {
	t.Helper()
	ctx := context.Background()
	key, err := signing.NewKey()
	require.NoError(t, err)
	w, err := archive.OpenWriter(ctx, b, stream, key, "test")
	require.NoError(t, err)
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	var all []*archive.Message
	seq := uint64(1)
	for s := range segments {
		start := t0.Add(time.Duration(s) * time.Hour)
		seg, err := w.Begin(ctx, start, start.Add(time.Hour))
		require.NoError(t, err)
		for i := range n {
			id := ulid.MustNew(ulid.Timestamp(start), ulid.DefaultEntropy()).String()
			m := &archive.Message{Stream: stream, Subject: "toolwire.result.acme.d1." + id, Seq: seq,
				Time: start.Add(time.Duration(i) * time.Second), Header: nats.Header{"Toolwire-Signer": {"U"}}, Data: []byte(fmt.Sprintf(`{"n":%d}`, seq))}
			require.NoError(t, seg.Add(m))
			all = append(all, m)
			seq++
		}
		seq++ // a deleted message between segments: counted as missing
		_, err = w.Seal(ctx, seg, seq-1, 0)
		require.NoError(t, err)
	}
	return all
}

func TestVerifyFindsADroppedOrChangedSegment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := archive.OpenBucket(ctx, t.TempDir())
	require.NoError(t, err)
	defer b.Close()
	writeChain(t, b, "S", 4, 3)

	rep, err := archive.Verify(ctx, b, "S", archive.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep.Problems)
	require.Equal(t, 4, rep.Segments)
	require.Equal(t, 12, rep.Messages)
	require.Equal(t, uint64(4), rep.Missing)
	require.Len(t, rep.Signers, 1)

	// A segment removed from the middle of the chain is a gap.
	require.NoError(t, b.Delete(ctx, "S/0000000000000001.manifest.json"))
	rep, err = archive.Verify(ctx, b, "S", archive.VerifyOptions{})
	require.NoError(t, err)
	require.False(t, rep.OK())
	require.Equal(t, "gap", rep.Problems[0].Kind)
	require.Equal(t, uint64(1), rep.Problems[0].Index)

	// The last segment removed: the head names it.
	require.NoError(t, b.Delete(ctx, "S/0000000000000003.manifest.json"))
	rep, err = archive.Verify(ctx, b, "S", archive.VerifyOptions{})
	require.NoError(t, err)
	require.Contains(t, kinds(rep), "head")

	// A signer that is not trusted.
	rep, err = archive.Verify(ctx, b, "S", archive.VerifyOptions{Trusted: func(string) bool { return false }})
	require.NoError(t, err)
	require.Contains(t, kinds(rep), "signature")
}

func TestVerifyFindsChangedRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := archive.OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	defer b.Close()
	writeChain(t, b, "S", 2, 2)
	segs, err := archive.NewReader(b).Segments(ctx, "S")
	require.NoError(t, err)
	require.Len(t, segs, 2)
	require.NoError(t, b.WriteAll(ctx, segs[0].Records, []byte("not what was sealed"), nil))
	rep, err := archive.Verify(ctx, b, "S", archive.VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"changed"}, kinds(rep))
}

func kinds(rep *archive.Report) []string {
	var out []string
	for _, p := range rep.Problems {
		out = append(out, p.Kind)
	}
	return out
}

// A chain is tied to its stream and its head: one stream's chain copied
// under another's name, or a head that does not name the chain's last
// segment as it is, does not verify.
func TestVerifyTiesTheChainToItsStreamAndHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := archive.OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	defer b.Close()
	writeChain(t, b, "R", 2, 3)
	it := b.List(&blob.ListOptions{Prefix: "R/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		data, err := b.ReadAll(ctx, obj.Key)
		require.NoError(t, err)
		require.NoError(t, b.WriteAll(ctx, "C/"+strings.TrimPrefix(obj.Key, "R/"), data, nil))
	}
	rep, err := archive.Verify(ctx, b, "C", archive.VerifyOptions{})
	require.NoError(t, err)
	require.False(t, rep.OK(), "R's chain verified as C's")
	require.Contains(t, kinds(rep), "changed")

	head, err := b.ReadAll(ctx, "R/head.json")
	require.NoError(t, err)
	var h archive.Head
	require.NoError(t, json.Unmarshal(head, &h))
	h.ToSeq++
	edited, err := json.Marshal(h)
	require.NoError(t, err)
	require.NoError(t, b.WriteAll(ctx, "R/head.json", edited, nil))
	rep, err = archive.Verify(ctx, b, "R", archive.VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"head"}, kinds(rep))
}

// A directory store keeps what the streams hold, secrets included: its
// directories are 0700 and its files 0600.
func TestDirectoryStoreIsPrivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "archive")
	b, err := archive.OpenBucket(ctx, dir)
	require.NoError(t, err)
	defer b.Close()
	writeChain(t, b, "S", 2, 3)
	n := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		require.Equal(t, want, fi.Mode().Perm(), path)
		n++
		return nil
	}))
	require.Greater(t, n, 5)
}

// A store URL's query (keys, endpoint credentials) and user info never
// reach an error.
func TestStoreURLIsRedactedInErrors(t *testing.T) {
	t.Parallel()
	_, err := archive.OpenBucket(context.Background(), "s3://user:PASSWORD@bkt?region=x&bogus=SECRET1&endpoint=http://u:SECRET2@127.0.0.1:1")
	require.Error(t, err)
	require.Contains(t, err.Error(), "s3://bkt")
	for _, s := range []string{"PASSWORD", "SECRET1", "SECRET2"} {
		require.NotContains(t, err.Error(), s)
	}
}

// A Reader lists a stream's segments once, then looks only for the ones
// sealed since (the next index's manifest): reads do not list the whole
// chain each time, and a segment sealed after the listing is read.
func TestReaderListsOnceThenFollowsTheChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := archive.OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	const stream = "TOOLWIRE_RESULTS"
	all := writeChain(t, b, stream, 3, 2)

	r := archive.NewReader(b)
	lists := 0
	r.OnList = func(string) { lists++ }
	count := func() int {
		n := 0
		require.NoError(t, r.Each(ctx, stream, archive.Query{}, func(*archive.Message) bool { n++; return true }))
		return n
	}
	for range 3 {
		require.Equal(t, len(all), count())
	}
	require.Equal(t, 1, lists, "listed once")

	key, err := signing.NewKey()
	require.NoError(t, err)
	w, err := archive.OpenWriter(ctx, b, stream, key, "test")
	require.NoError(t, err)
	last := all[len(all)-1]
	start := last.Time.Truncate(time.Hour).Add(time.Hour)
	seg, err := w.Begin(ctx, start, start.Add(time.Hour))
	require.NoError(t, err)
	require.NoError(t, seg.Add(&archive.Message{Stream: stream, Subject: "toolwire.result.acme.d1.x", Seq: last.Seq + 2, Time: start, Data: []byte("{}")}))
	_, err = w.Seal(ctx, seg, last.Seq+2, 0)
	require.NoError(t, err)
	require.Equal(t, len(all)+1, count(), "the segment sealed since is read")
	require.Equal(t, 1, lists, "without listing again")
}

// Verify of a chain the archiver extends meanwhile finds no problem: the
// head it reads names a segment of the chain it lists (found in CI: the
// head was read after the listing and named a newer segment).
func TestVerifyWhileTheChainGrows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := archive.OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	defer b.Close()
	key, err := signing.NewKey()
	require.NoError(t, err)
	w, err := archive.OpenWriter(ctx, b, "R", key, "test")
	require.NoError(t, err)
	const segments = 150
	wrote := make(chan error, 1)
	go func() {
		t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
		for s := range segments {
			start := t0.Add(time.Duration(s) * time.Minute)
			seg, err := w.Begin(ctx, start, start.Add(time.Minute))
			if err == nil {
				id := ulid.MustNew(ulid.Timestamp(start), ulid.DefaultEntropy()).String()
				err = seg.Add(&archive.Message{Stream: "R", Subject: "toolwire.result.acme.d1." + id, Seq: uint64(s + 1), Time: start, Data: []byte("{}")})
			}
			if err == nil {
				_, err = w.Seal(ctx, seg, uint64(s+1), 0)
			}
			if err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	for done := false; !done; {
		select {
		case err := <-wrote:
			require.NoError(t, err)
			done = true
		default:
		}
		rep, err := archive.Verify(ctx, b, "R", archive.VerifyOptions{})
		require.NoError(t, err)
		require.True(t, rep.OK(), "%+v", rep.Problems)
	}
}
