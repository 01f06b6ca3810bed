package telemetry

import "go.opentelemetry.io/otel/trace"

// ScopeName is the instrumentation scope of toolwire's tracers.
const ScopeName = "github.com/toolwire/toolwire"

// Tracer returns toolwire's tracer from tp, or nil when tp is nil
// (tracing off: callers then skip span work altogether).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(ScopeName)
}
