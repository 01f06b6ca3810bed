// Package helper is the sandbox's helper (see package sandbox, "The
// helper"): it lives in a package of its own, importing only the standard
// library, x/sys, Landlock and go-seccomp-bpf, so that its init — which
// runs the helper when this process is one — comes early in the binary's
// package initialisation, before the heavy initialisers of the rest of
// the worker (a JSON Schema library compiling its metaschemas, generated
// protobuf registries), which a helper would otherwise pay on every start.
package helper
