package archive

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"

	// The stores an archive URL may name besides a directory: file://,
	// mem:// (tests), s3:// (AWS S3 and S3-compatible servers);
	// azblob:// (Azure Blob Storage) is opened by openAzure, gs://
	// (Google Cloud Storage) by openGCS.
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
)

// OpenBucket opens the archive store that location names: a directory
// (a path, made when missing) or a URL gocloud.dev/blob opens — file://,
// s3://bucket?region=…&endpoint=…&use_path_style=true, mem:// (tests).
// The caller closes the bucket.
func OpenBucket(ctx context.Context, location string) (*blob.Bucket, error) {
	if location == "" {
		return nil, errors.New("archive: no store named")
	}
	if !strings.Contains(location, "://") {
		dir, err := filepath.Abs(location)
		if err != nil {
			return nil, fmt.Errorf("archive: store %s: %w", location, err)
		}
		// Directories 0700 and files 0600 (fileblob writes each file
		// through os.CreateTemp, 0600, and renames it): the archive holds
		// what the streams hold, secret arguments included.
		b, err := fileblob.OpenBucket(dir, &fileblob.Options{CreateDir: true, DirFileMode: 0o700, NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
		if err != nil {
			return nil, fmt.Errorf("archive: store %s: %w", dir, err)
		}
		return b, nil
	}
	var b *blob.Bucket
	var err error
	u, perr := url.Parse(location)
	switch {
	case perr == nil && u.Scheme == azureblob.Scheme:
		b, err = openAzure(ctx, u)
	case perr == nil && u.Scheme == gcsblob.Scheme:
		b, err = openGCS(ctx, u)
	default:
		b, err = blob.OpenBucket(ctx, location)
	}
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), location, redactURL(location))
		if perr == nil {
			msg = strings.ReplaceAll(msg, u.String(), redactURL(location))
		}
		return nil, &redactedError{msg: fmt.Sprintf("archive: store %s: %s", redactURL(location), msg), err: err}
	}
	return b, nil
}

// redactedError is an error whose message no longer holds the store URL's
// query and user info (gocloud.dev quotes the whole URL in its errors),
// wrapping the original for errors.Is and gcerrors.Code.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactURL is location without its query (which may carry credentials or
// a signing secret), for errors and logs.
func redactURL(location string) string {
	u, err := url.Parse(location)
	if err != nil {
		return "(unparsable URL)"
	}
	u.RawQuery, u.User = "", nil
	return u.String()
}

// localDir returns the directory of a store that is a local directory
// (fileblob: a path or file://), "" for any other store, with its
// permission bits.
func localDir(b *blob.Bucket) (os.FileMode, bool) {
	var fi os.FileInfo
	if !b.As(&fi) {
		return 0, false
	}
	return fi.Mode().Perm(), true
}

// notFound reports whether err is a store's "no such object". gcsblob
// maps Cloud Storage's 403 (permission denied "or it may not exist") to
// NotFound too: that is no missing object — a writer would take the
// chain for empty and lose every race (ErrRaced) — but an error (denied).
func notFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound && !denied(err) }

// denied reports whether err is Cloud Storage's 403: the store's
// credentials may not do what was asked.
func denied(err error) bool {
	var g *googleapi.Error
	return errors.As(err, &g) && g.Code == http.StatusForbidden
}

// readErr is err, reading what, as an error of the archive's: a 403
// says permission denied first.
func readErr(what string, err error) error {
	if denied(err) {
		return fmt.Errorf("archive: %s: permission denied (the store's credentials may not read it): %w", what, err)
	}
	return fmt.Errorf("archive: %s: %w", what, err)
}

// exists reports whether err is a store's "the object exists already" (a
// write with IfNotExist).
func exists(err error) bool { return gcerrors.Code(err) == gcerrors.FailedPrecondition }
