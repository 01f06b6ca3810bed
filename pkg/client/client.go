package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"connectrpc.com/connect"

	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

// Client calls tools through a toolwire dispatcher's DispatcherService. It
// is safe for concurrent use; create one per dispatcher address and share
// it.
type Client struct {
	rpc toolwirev1connect.DispatcherServiceClient
}

// New returns a Client of the dispatcher API at baseURL, e.g.
// "http://127.0.0.1:8080" (a path prefix is kept, for a dispatcher behind
// a reverse proxy).
//
// By default the client speaks the Connect protocol with binary protobuf
// over http.DefaultClient and sends no credentials; see the Options.
//
// New returns an error if baseURL is not an absolute http or https URL.
// It does not connect: an unreachable dispatcher shows up as an error of
// the first call.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("toolwire client: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("toolwire client: base URL %q: want http://host[:port] or https://host[:port]", baseURL)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.httpClient == nil {
		o.httpClient = http.DefaultClient
		if o.grpc && u.Scheme == "http" {
			// gRPC needs HTTP/2; over plain http:// that is h2c with prior
			// knowledge, which the default transport does not speak.
			o.httpClient = &http.Client{Transport: h2cTransport()}
		}
	}
	var copts []connect.ClientOption
	if o.json {
		copts = append(copts, connect.WithProtoJSON())
	}
	if o.grpc {
		copts = append(copts, connect.WithGRPC())
	}
	if o.apiKey != "" {
		copts = append(copts, connect.WithInterceptors(bearer("Bearer "+o.apiKey)))
	}
	return &Client{rpc: toolwirev1connect.NewDispatcherServiceClient(o.httpClient, baseURL, copts...)}, nil
}

// h2cTransport returns a transport that speaks HTTP/2 only: with prior
// knowledge over http:// and negotiated by TLS over https://.
func h2cTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP2(true)
	t.Protocols.SetUnencryptedHTTP2(true)
	return t
}

// bearer is an interceptor that sets the Authorization header of every
// request, unary and streaming.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", string(b))
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// transportError wraps an error of the RPC layer so that connect.CodeOf
// and errors.As(err, new(*connect.Error)) still see it.
func transportError(op string, err error) error {
	return fmt.Errorf("toolwire client: %s: %w", op, err)
}
