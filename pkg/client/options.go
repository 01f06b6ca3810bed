package client

import "net/http"

// Option configures a Client.
type Option func(*options)

type options struct {
	httpClient *http.Client
	apiKey     string
	json       bool
	grpc       bool
}

// WithHTTPClient sends requests with c instead of http.DefaultClient: set
// TLS, proxies, connection pools or an overall timeout there. With
// WithGRPC over plain http://, c's transport must speak HTTP/2 with prior
// knowledge (http.Protocols.SetUnencryptedHTTP2).
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) { o.httpClient = c }
}

// WithAPIKey sends `Authorization: Bearer <key>` with every request. The
// dispatcher derives the caller's tenant, agent and scopes from the key;
// they are never taken from a request body.
func WithAPIKey(key string) Option {
	return func(o *options) { o.apiKey = key }
}

// WithJSON encodes messages as protobuf JSON instead of binary protobuf:
// slower, but readable on the wire and through proxies that log bodies.
func WithJSON() Option {
	return func(o *options) { o.json = true }
}

// WithGRPC speaks the gRPC protocol instead of Connect, for paths through
// gRPC-only proxies. It needs HTTP/2; over plain http:// the client uses
// an HTTP/2 transport with prior knowledge (h2c) unless WithHTTPClient
// gives one.
func WithGRPC() Option {
	return func(o *options) { o.grpc = true }
}
