package archive_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/testdeps"
)

// storeConformance is what the archive needs of a store, run against
// each kind through the real client of its gocloud.dev driver: a chain
// written, verified and read back by sequence, a result found by call
// id, a second writer continuing the chain, and a create-if-absent that
// holds (two writers sealing the same index: the second gets ErrRaced).
func storeConformance(t *testing.T, b *blob.Bucket) {
	t.Helper()
	ctx := context.Background()
	const stream = "TOOLWIRE_RESULTS"
	msgs := writeChain(t, b, stream, 3, 4)
	rep, err := archive.Verify(ctx, b, stream, archive.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep.Problems)
	require.Equal(t, 12, rep.Messages)

	r := archive.NewReader(b)
	var got []uint64
	require.NoError(t, r.Each(ctx, stream, archive.Query{FromSeq: 6, ToSeq: 11}, func(m *archive.Message) bool {
		got = append(got, m.Seq)
		return true
	}))
	require.Equal(t, []uint64{6, 7, 8, 9, 11}, got)

	last := msgs[len(msgs)-1]
	callID := last.Subject[len("toolwire.result.acme.d1."):]
	found, err := r.FindResult(ctx, stream, callID)
	require.NoError(t, err)
	require.Equal(t, last.Seq, found.Seq)
	require.Equal(t, last.Data, found.Data)
	require.Equal(t, "U", found.Header.Get("Toolwire-Signer"))
	_, err = r.FindResult(ctx, stream, ulid.Make().String())
	require.ErrorIs(t, err, archive.ErrNotFound)

	// Two writers continue the chain where the first left it; only one
	// of them seals the next segment.
	key, err := signing.NewKey()
	require.NoError(t, err)
	w1, err := archive.OpenWriter(ctx, b, stream, key, "one")
	require.NoError(t, err)
	require.Equal(t, uint64(2), w1.Head().Index)
	require.Equal(t, uint64(15), w1.Head().ToSeq)
	w2, err := archive.OpenWriter(ctx, b, stream, key, "two")
	require.NoError(t, err)
	start := time.Date(2026, 1, 2, 6, 0, 0, 0, time.UTC)
	var segs []*archive.Segment
	for _, w := range []*archive.Writer{w1, w2} {
		seg, err := w.Begin(ctx, start, start.Add(time.Hour))
		require.NoError(t, err)
		id := ulid.MustNew(ulid.Timestamp(start), ulid.DefaultEntropy()).String()
		require.NoError(t, seg.Add(&archive.Message{Stream: stream, Subject: "toolwire.result.acme.d1." + id, Seq: 16, Time: start,
			Header: nats.Header{"Toolwire-Signer": {"U"}}, Data: []byte(`{}`)}))
		segs = append(segs, seg)
	}
	_, err = w1.Seal(ctx, segs[0], 16, 0)
	require.NoError(t, err)
	_, err = w2.Seal(ctx, segs[1], 16, 0)
	require.ErrorIs(t, err, archive.ErrRaced)
	rep, err = archive.Verify(ctx, b, stream, archive.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep.Problems)
	require.Equal(t, 4, rep.Segments)

	_, err = b.ReadAll(ctx, "no/such/object")
	require.Equal(t, gcerrors.NotFound, gcerrors.Code(err))
}

// The S3 path: the real S3 client of gocloud.dev's s3blob against an
// S3-compatible server (gofakes3) over HTTP on loopback.
func TestS3Store(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("archive"))
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	b, err := archive.OpenBucket(ctx, "s3://archive?region=us-east-1&use_path_style=true&anonymous=true&endpoint="+srv.URL)
	require.NoError(t, err)
	defer b.Close()
	storeConformance(t, b)
}

// The GCS path: the real Cloud Storage client of gocloud.dev's gcsblob
// (JSON API over HTTP) against a GCS server (fake-gcs-server) listening
// on loopback, named by STORAGE_EMULATOR_HOST as gcsblob documents. The
// variable is the process's: this test is not parallel.
func TestGCSStore(t *testing.T) {
	ctx := context.Background()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1", Writer: io.Discard})
	require.NoError(t, err)
	defer srv.Stop()
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "archive"})
	t.Setenv("STORAGE_EMULATOR_HOST", srv.URL()[len("http://"):])
	b, err := archive.OpenBucket(ctx, "gs://archive")
	require.NoError(t, err)
	defer b.Close()
	storeConformance(t, b)
}

// The Azure path: the real Azure Blob client of gocloud.dev's azureblob
// against Azurite (the npm package, installed by `make azurite` from
// testdata/azurite/package-lock.json) started on loopback, with the
// credentials azureblob reads from the environment (Azurite's account
// and its published development key). The variables are the process's:
// this test is not parallel.
func TestAzureStore(t *testing.T) {
	ctx := context.Background()
	endpoint := startAzurite(t)
	t.Setenv("AZURE_STORAGE_ACCOUNT", azuriteAccount)
	t.Setenv("AZURE_STORAGE_KEY", azuriteKey)
	b, err := archive.OpenBucket(ctx, "azblob://archive?protocol=http&domain="+endpoint)
	require.NoError(t, err)
	defer b.Close()
	var c *container.Client
	require.True(t, b.As(&c))
	_, err = c.Create(ctx, nil)
	require.NoError(t, err)
	storeConformance(t, b)

	// A store error names no credential.
	_, err = b.ReadAll(ctx, "no/such/object")
	require.Error(t, err)
	require.NotContains(t, err.Error(), azuriteKey)
}

// Azurite's development account and key, published in its documentation:
// no secret.
const (
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// azuriteDir is where `make azurite` installs Azurite.
const azuriteDir = "../../testdata/azurite"

// startAzurite starts Azurite's blob service, in memory, on a free
// loopback port, stops it when the test ends, and returns its host:port.
// Without node or Azurite the test fails under CI=true and is skipped
// otherwise.
func startAzurite(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		testdeps.Missing(t, "run `make azurite`", format, args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node not found: %v", err)
	}
	main, err := filepath.Abs(filepath.Join(azuriteDir, "node_modules/azurite/dist/src/blob/main.js"))
	require.NoError(t, err)
	if _, err := os.Stat(main); err != nil {
		missing("Azurite is not installed: %v", err)
	}
	cmd := exec.Command(node, main, "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence",
		"--extentMemoryLimit", "64", "--skipApiVersionCheck", "--disableTelemetry", "--silent")
	cmd.Dir = t.TempDir()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	listening := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, addr, ok := strings.Cut(sc.Text(), "successfully listens on http://"); ok {
				listening <- strings.TrimSpace(addr)
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-drained
		_ = cmd.Wait()
	})
	select {
	case addr := <-listening:
		return addr
	case <-drained:
		t.Fatal("Azurite exited before it listened")
	case <-time.After(time.Minute):
		t.Fatal("Azurite did not listen within a minute")
	}
	return ""
}

// An Azure store's credentials never reach an error: a SAS token, which
// every request carries in its query, is not quoted when the service
// cannot be reached (net/http quotes a request's URL), nor a key or a
// connection string that does not parse. The variables are the
// process's: this test is not parallel.
func TestAzureCredentialsAreRedactedInErrors(t *testing.T) {
	ctx := context.Background()
	const sig = "SIGNATURE0SECRET"
	t.Setenv("AZURE_STORAGE_ACCOUNT", "acct")
	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "sv=2024-11-04&ss=b&sig="+sig)
	t.Setenv("AZURE_STORAGE_PROTOCOL", "http")
	t.Setenv("AZURE_STORAGE_DOMAIN", "127.0.0.1:1") // nothing listens there
	defer archive.SetAzureRetries(-1)()             // one try: retries would only wait longer
	b, err := archive.OpenBucket(ctx, "azblob://archive")
	require.NoError(t, err)
	defer b.Close()
	_, err = b.ReadAll(ctx, "TOOLWIRE_CALLS/head.json")
	require.Error(t, err)
	require.Contains(t, err.Error(), "127.0.0.1:1")
	require.NotContains(t, err.Error(), sig)

	// With a SAS token the URL may not point the requests elsewhere.
	_, err = archive.OpenBucket(ctx, "azblob://archive?domain=attacker.example")
	require.ErrorContains(t, err, "AZURE_STORAGE_SAS_TOKEN")

	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "")
	t.Setenv("AZURE_STORAGE_KEY", "not base64: KEY0SECRET")
	_, err = archive.OpenBucket(ctx, "azblob://archive")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "KEY0SECRET")

	t.Setenv("AZURE_STORAGE_KEY", "")
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "AccountName=acct;AccountKey=CONN0SECRET;BlobEndpoint")
	_, err = archive.OpenBucket(ctx, "azblob://archive")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "CONN0SECRET")
}

// A gs:// store without Google Cloud credentials is an error that says
// so, and nothing is printed on standard output (toolctl audit writes its
// JSON there; gcsblob's own opener printed a warning and went on without
// credentials). The credentials and STORAGE_EMULATOR_HOST are read at
// each open, not once a process. The variables and os.Stdout are the
// process's: this test is not parallel.
func TestGCSWithoutCredentials(t *testing.T) {
	ctx := context.Background()
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("STORAGE_EMULATOR_HOST_GRPC", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json"))
	noCredentials := func() {
		t.Helper()
		r, w, err := os.Pipe()
		require.NoError(t, err)
		stdout := os.Stdout
		os.Stdout = w
		b, err := archive.OpenBucket(ctx, "gs://archive?access_id=someone")
		os.Stdout = stdout
		require.NoError(t, w.Close())
		printed, rerr := io.ReadAll(r)
		require.NoError(t, rerr)
		if b != nil {
			_ = b.Close()
		}
		require.Empty(t, string(printed), "printed on stdout")
		require.Error(t, err)
		require.Contains(t, err.Error(), "no Google Cloud credentials")
		require.Contains(t, err.Error(), "gs://archive")
		require.NotContains(t, err.Error(), "someone")
	}
	noCredentials()

	t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:1") // opening sends no request
	b, err := archive.OpenBucket(ctx, "gs://archive")
	require.NoError(t, err)
	require.NoError(t, b.Close())

	t.Setenv("STORAGE_EMULATOR_HOST", "")
	noCredentials()
}

// A Cloud Storage that answers 403 (credentials that may not read the
// store) is no empty store: a writer opening a chain there fails, saying
// permission denied, instead of taking the chain for empty (gcsblob maps
// 403 to NotFound) and losing every race to seal its first segment. The
// server is an HTTP server on loopback answering every request 403, as
// Cloud Storage does, named by STORAGE_EMULATOR_HOST: this test is not
// parallel.
func TestGCSPermissionDeniedIsNoMissingObject(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"error":{"code":403,"message":"archiver@example.iam.gserviceaccount.com does not have storage.objects.get access","errors":[{"reason":"forbidden"}]}}`)
	}))
	defer srv.Close()
	t.Setenv("STORAGE_EMULATOR_HOST", srv.Listener.Addr().String())
	b, err := archive.OpenBucket(ctx, "gs://archive")
	require.NoError(t, err)
	defer b.Close()
	key, err := signing.NewKey()
	require.NoError(t, err)
	_, err = archive.OpenWriter(ctx, b, "S", key, "a")
	require.Error(t, err)
	require.Contains(t, err.Error(), "permission denied")
}
