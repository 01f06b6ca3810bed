package archive

import (
	"context"
	"errors"
	"io"

	"gocloud.dev/blob"
)

// Every object is written with Bucket.Upload, which hands the driver a
// reader, never with Bucket.NewWriter or WriteAll, which write into a
// pipe the driver reads: gocloud.dev's azureblob (v0.47.0) closes and
// clears that pipe when an upload fails, and its Writer.Close, waiting
// for the upload meanwhile, then closes the cleared pipe — a nil pointer
// dereference. A create-if-absent that loses a race (ErrRaced) fails so,
// and any upload the service refuses while Close waits; the process
// would panic. Through Upload the driver reads from the caller's reader
// and has no pipe of its own.

// errAborted is what the store's upload reads once a streamed object is
// aborted: the object is not written.
var errAborted = errors.New("archive: upload aborted")

// uploadWriter streams what is written to it into one object: a
// goroutine of its own runs Bucket.Upload, reading from a pipe. Close
// ends the object and returns the upload's error; Abort fails the upload
// so that nothing is written. Either waits for the goroutine: one of
// them must be called.
type uploadWriter struct {
	pw   *io.PipeWriter
	done chan error
}

func newUploadWriter(ctx context.Context, b *blob.Bucket, key string, opts *blob.WriterOptions) *uploadWriter {
	pr, pw := io.Pipe()
	u := &uploadWriter{pw: pw, done: make(chan error, 1)}
	go func() {
		err := b.Upload(ctx, key, pr, opts)
		// Whatever the upload did not read fails the writes now (a
		// failed upload stops reading): they never block for good.
		_ = pr.CloseWithError(errors.Join(err, io.ErrClosedPipe))
		u.done <- err
	}()
	return u
}

func (u *uploadWriter) Write(p []byte) (int, error) { return u.pw.Write(p) }

// Close ends the object and returns the upload's error.
func (u *uploadWriter) Close() error {
	_ = u.pw.Close()
	return <-u.done
}

// Abort fails the upload (the store writes no object) and waits for it.
func (u *uploadWriter) Abort() {
	_ = u.pw.CloseWithError(errAborted)
	<-u.done
}
