package api

import (
	"fmt"
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
// MCP endpoint does for its clients. Submit renders its answer too.
func (s *Service) profile(h http.Header) (*profiles.Profile, error) {
	p, err := s.profiles.Select(h.Get(profiles.Header))
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return p, nil
}

// noProfile refuses a request of a method that does not render its
// answer (Watch, ListTools, GetTool, GetOutput) when it names a profile:
// INVALID_ARGUMENT, rather than an answer the caller would take as
// rendered for its client when it is not.
func noProfile(h http.Header, method string) error {
	if h.Get(profiles.Header) == "" {
		return nil
	}
	return connect.NewError(connect.CodeInvalidArgument,
		fmt.Errorf("%s does not render its answer for a client profile: send %s only on Call, Submit and GetResult", method, profiles.Header))
}
