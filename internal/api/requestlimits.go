package api

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/toolwire/toolwire/internal/registry"
)

// Request limits. Every API request is bounded before it is decoded:
//
//   - its body, while it is read: http.MaxBytesReader on every route of the
//     server and Connect's read limit on the API
//     (dispatch.Config.MaxRequestBytes),
//     also after gzip decompression (boundedGzip), so an oversized body is
//     refused with resource_exhausted having cost at most the limit;
//   - the number of object members and array elements and the nesting of
//     a body the limit admits (dispatch.Config.MaxArgsValues plus
//     requestFields, MaxRequestDepth),
//     by a scan that allocates nothing, before protojson or proto builds the
//     message: a google.protobuf.Struct costs about 600 bytes of allocation
//     per value, so a body of a few hundred KiB of short keys would cost
//     tens of MiB and tens of milliseconds to build.

// bodySlack is what the HTTP body limit allows above MaxRequestBytes: the
// framing of a gRPC or Connect streaming envelope, so a message at the
// limit is never cut by the body limit instead of the message limit.
const bodySlack = 1 << 10

// requestFields is what the body scan allows above MaxArgsValues: the
// request's own fields, so arguments within the limit always reach
// admission, which answers those over it with VALIDATION.
const requestFields = 64

// errRequestTooComplex is returned by the codecs for a request body over
// the values or depth limit; Connect answers it as invalid_argument.
var errRequestTooComplex = errors.New("request too complex")

// requestLimits are the limits a Service's codecs apply.
type requestLimits struct {
	values, depth int
}

// handlerOptions returns the Connect options that bound a request: the
// message read limit, the bounded gzip decompressor and the scanning
// codecs.
func (l requestLimits) handlerOptions(maxBytes int64) []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithReadMaxBytes(int(maxBytes)),
		connect.WithCompression("gzip",
			func() connect.Decompressor { return &boundedGzip{max: maxBytes} },
			func() connect.Compressor { return gzip.NewWriter(io.Discard) }),
		connect.WithCodec(protoCodec{l}),
		connect.WithCodec(jsonCodec{name: "json", limits: l}),
		connect.WithCodec(jsonCodec{name: "json; charset=utf-8", limits: l}),
	}
}

// LimitBody wraps h so that no request body is read past maxBytes plus
// the framing of one message; a handler reading past it gets an
// *http.MaxBytesError (Connect answers resource_exhausted) and the
// connection is closed. The dispatcher process (internal/dispatchd) wraps
// its whole server with it; Service.Handler applies it to the API.
func LimitBody(h http.Handler, maxBytes int64) http.Handler {
	return http.MaxBytesHandler(h, maxBytes+bodySlack)
}

// scanJSON checks a JSON body against the limits without decoding it.
// Malformed JSON is left to the decoder.
func (l requestLimits) scanJSON(b []byte) error {
	values, depth := registry.JSONShape(b, l.values, l.depth)
	if depth > l.depth {
		return fmt.Errorf("%w: JSON nests deeper than %d levels", errRequestTooComplex, l.depth)
	}
	if values > l.values {
		return fmt.Errorf("%w: more than %d JSON members and elements", errRequestTooComplex, l.values)
	}
	return nil
}

// Well-known messages the binary scan treats as JSON.
const (
	structName    protoreflect.FullName = "google.protobuf.Struct"
	listValueName protoreflect.FullName = "google.protobuf.ListValue"
	valueName     protoreflect.FullName = "google.protobuf.Value"
)

// scanProto checks a binary protobuf body against the same limits, as
// JSON would count it: a field occurrence is a value, except inside a map
// entry and the oneof of a google.protobuf.Value (a Struct member or a
// list element counts once), and a Struct or ListValue is one level of
// nesting below the request's own. Malformed input is left to the
// decoder.
func (l requestLimits) scanProto(b []byte, md protoreflect.MessageDescriptor) error {
	s := protoScan{limits: l}
	return s.message(b, md, 1, 0)
}

type protoScan struct {
	limits requestLimits
	values int
}

// message scans b as a message of type md at JSON depth depth; nest counts
// every level, a backstop for recursive types other than Struct.
func (s *protoScan) message(b []byte, md protoreflect.MessageDescriptor, depth, nest int) error {
	if nest > 3*s.limits.depth {
		return fmt.Errorf("%w: messages nest deeper than %d levels", errRequestTooComplex, 3*s.limits.depth)
	}
	counted := !md.IsMapEntry() && md.FullName() != valueName
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if counted {
			s.values++
			if s.values > s.limits.values {
				return fmt.Errorf("%w: more than %d fields, members and elements", errRequestTooComplex, s.limits.values)
			}
		}
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		fd := fields.ByNumber(num)
		if fd == nil || fd.Kind() != protoreflect.MessageKind {
			continue
		}
		sub, d := fd.Message(), depth
		if name := sub.FullName(); name == structName || name == listValueName {
			if d++; d > s.limits.depth {
				return fmt.Errorf("%w: arguments nest deeper than %d levels", errRequestTooComplex, s.limits.depth)
			}
		}
		if err := s.message(v, sub, d, nest+1); err != nil {
			return err
		}
	}
	return nil
}

// protoCodec is Connect's binary codec with the scan first.
type protoCodec struct{ limits requestLimits }

func (protoCodec) Name() string { return "proto" }

func (protoCodec) Marshal(m any) ([]byte, error) {
	pm, err := asProto(m)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(pm)
}

func (protoCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, err := asProto(m)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (protoCodec) MarshalStable(m any) ([]byte, error) {
	pm, err := asProto(m)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(pm)
}

func (protoCodec) IsBinary() bool { return true }

func (c protoCodec) Unmarshal(b []byte, m any) error {
	pm, err := asProto(m)
	if err != nil {
		return err
	}
	if err := c.limits.scanProto(b, pm.ProtoReflect().Descriptor()); err != nil {
		return err
	}
	if err := proto.Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

// jsonCodec is Connect's JSON codec (protojson, unknown fields discarded)
// with the scan first.
type jsonCodec struct {
	name   string
	limits requestLimits
}

func (c jsonCodec) Name() string { return c.name }

func (jsonCodec) Marshal(m any) ([]byte, error) {
	pm, err := asProto(m)
	if err != nil {
		return nil, err
	}
	return protojson.Marshal(pm)
}

func (jsonCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, err := asProto(m)
	if err != nil {
		return nil, err
	}
	return protojson.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (c jsonCodec) Unmarshal(b []byte, m any) error {
	pm, err := asProto(m)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return errors.New("zero-length payload is not a valid JSON object")
	}
	if err := c.limits.scanJSON(b); err != nil {
		return err
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

func asProto(m any) (proto.Message, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return pm, nil
}

// boundedGzip is Connect's gzip decompressor with a hard end: past max
// bytes of output it fails instead of going on, so the rest of a
// decompression bomb is never inflated (Connect reads one byte past its
// limit, then discards the remainder to measure it).
type boundedGzip struct {
	gzip.Reader
	max, n int64
}

func (g *boundedGzip) Reset(r io.Reader) error {
	g.n = 0
	return g.Reader.Reset(r)
}

func (g *boundedGzip) Read(p []byte) (int, error) {
	if g.n > g.max {
		return 0, &http.MaxBytesError{Limit: g.max}
	}
	p = p[:min(int64(len(p)), g.max+1-g.n)]
	n, err := g.Reader.Read(p)
	g.n += int64(n)
	return n, err
}
