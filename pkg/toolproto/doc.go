// Package toolproto holds the Go code generated from proto/toolwire/v1, the
// wire contract of toolwire. Nothing here is edited by hand: `make generate`
// rewrites it and `make verify` fails when it is stale.
//
// The message types live in package
// github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1 (toolwirev1) and the
// Connect client and handler in its toolwirev1connect subpackage.
package toolproto
