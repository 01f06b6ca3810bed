package api

import (
	"io"

	"connectrpc.com/connect"
)

// NewBoundedGzip returns the API's gzip decompressor for src with the
// output limit max.
func NewBoundedGzip(src io.Reader, max int64) (connect.Decompressor, error) {
	g := &boundedGzip{max: max}
	return g, g.Reset(src)
}
