package toolctl

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/audit"
)

// archiveFlag adds --archive to an audit or replay command.
func (a *app) archiveFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.archive, "archive", "", "the installation's archive store, as the dispatchers' --archive: a directory or a URL "+
		"(s3://bucket?region=..., gs://bucket, azblob://container); calls, results and events older than the streams' window are read from it (env TOOLWIRE_ARCHIVE)")
}

// openAudit attaches an audit source to the installation and, with
// --archive (or TOOLWIRE_ARCHIVE), to its archive store: the record is
// then the archive and the live streams as one. The caller calls done
// when it has finished reading.
func (a *app) openAudit(cmd *cobra.Command) (src *audit.Source, done func(), err error) {
	ctx := cmd.Context()
	src, err = audit.Open(ctx, a.nc, a.nats.prefix)
	if err != nil {
		return nil, nil, &requestError{err}
	}
	if v, ok := a.io.LookupEnv("TOOLWIRE_ARCHIVE"); ok && v != "" && !cmd.Flags().Changed("archive") {
		a.archive = v
	}
	if a.archive == "" {
		return src, func() {}, nil
	}
	store, err := archive.OpenBucket(ctx, a.archive)
	if err != nil {
		return nil, nil, fmt.Errorf("--archive: %w", err)
	}
	src.UseArchive(store)
	return src, func() { _ = store.Close() }, nil
}
