package api

import (
	"net/http"

	"connectrpc.com/connect"

	"github.com/toolwire/toolwire/internal/profiles"
)

// profile is the client profile a request names in its profiles.Header
// (internal/profiles; docs/mcp.md, "Client profiles"): nil when it names
// none, and the answer is the response as it is; a name that is no
// configured profile is INVALID_ARGUMENT, checked before the call runs.
// Call and GetResult render their answer's response with it (its `_meta`
// filtered, fallbacks for the content the client cannot show), as the
// MCP endpoint does for its clients.
func (s *Service) profile(h http.Header) (*profiles.Profile, error) {
	p, err := s.profiles.Select(h.Get(profiles.Header))
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return p, nil
}
