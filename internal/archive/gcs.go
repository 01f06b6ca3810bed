package archive

import (
	"context"
	"fmt"
	"net/url"
	"os"

	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"google.golang.org/api/option"
)

// openGCS opens a gs:// store as gocloud.dev's gcsblob URL opener does —
// the URL's parameters (anonymous, grpc, zonal, universe_domain, …) are
// its — with the client made here (gcsClient), not by the opener
// gcsblob registers, which prints a warning on standard output when it
// finds no credentials (and carries on without), and reads the
// credentials and STORAGE_EMULATOR_HOST once a process.
func openGCS(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	o, err := gcsOpener(ctx)
	if err != nil {
		return nil, err
	}
	return o.OpenBucketURL(ctx, u)
}

// gcsOpener makes the URL opener of a gs:// store at each open: with
// STORAGE_EMULATOR_HOST (or STORAGE_EMULATOR_HOST_GRPC) set, an
// unauthenticated client (the Cloud Storage client sends its requests to
// the emulator); else Application Default Credentials
// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's application-default login, or
// the metadata server), and without them an error.
func gcsOpener(ctx context.Context) (*gcsblob.URLOpener, error) {
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != "" {
		return &gcsblob.URLOpener{Client: gcp.NewAnonymousHTTPClient(gcp.DefaultTransport())}, nil
	}
	creds, err := gcp.DefaultCredentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("gs: no Google Cloud credentials (Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default login, or the metadata server): %w", err)
	}
	ts := gcp.CredentialsTokenSource(creds)
	client, err := gcp.NewHTTPClient(gcp.DefaultTransport(), ts)
	if err != nil {
		return nil, fmt.Errorf("gs: %w", err)
	}
	o := &gcsblob.URLOpener{Client: client, TokenSource: ts}
	if ud, err := creds.GetUniverseDomain(); err == nil && ud != "" {
		o.Options.ClientOptions = append(o.Options.ClientOptions, option.WithUniverseDomain(ud))
	}
	return o, nil
}
