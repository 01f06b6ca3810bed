// Package registry holds tool specs: it validates them, versions them by
// content hash, publishes them into the registry KV bucket, keeps a live,
// watched copy for dispatchers, compiles their input schemas once per schema
// hash, and renders them in the LLM providers' formats.
//
// # Layout in the bucket
//
// Key `<tool>` holds the current ToolSpec (binary protobuf) and key
// `versions.<tool>.<version>` every version ever published, so a call can
// pin an older version and a worker can tell a stale version from an
// unknown one. Workers publish the specs they serve at start-up and write
// only when the version changed, so restarts do not churn the bucket.
//
// # Versions
//
// A version is the hex SHA-256 of the deterministic protobuf encoding of
// the spec with its version and disabled fields cleared: any change of
// schema, description, timeouts or executor config is a new version.
package registry
