// Package skills serves skills as a tool: directories in the common
// SKILL.md format, loaded by a worker from its configured directories
// (workerconfig's `skills:`), versioned in the registry as part of one
// native tool's spec, listed to the model by name and description, and
// loaded through that one tool, `skill`, which goes through admission and
// the policy like any tool. There is no parallel infrastructure: no
// bucket, subject, RPC or admission step of its own (docs/skills.md).
//
// # The format
//
// A skill is a directory holding SKILL.md: YAML front matter between two
// lines `---` with `name` (the directory's name: lowercase letters,
// digits and single hyphens, at most 64) and `description` (what the
// skill does and when to use it, at most 1024 characters), then the
// instructions in Markdown. Every other file of the directory is a
// resource (scripts, references, templates). The format's other front
// matter fields (license, compatibility, metadata, allowed-tools) stay in
// the file, which the model reads whole; toolwire interprets none of
// them: a skill never grants itself a tool, the policy does. Hidden
// entries (a leading dot) are not loaded.
//
// # Loading: bounded and confined
//
// Load reads everything into memory once, at the worker's start, within
// the constants of limits.go (skills, entries per directory, depth, path
// length, bytes per file, per skill and in all, front matter), checking
// each bound before it reads: a directory is read with ReadDir(n), never
// whole; a file is opened without blocking (O_NONBLOCK) and its size
// is checked on what was opened (fstat: a regular file, never a pipe
// swapped in after the walk's stat, which would hang the start), then it
// is read through a LimitReader of that size. Files are opened through os.Root
// (one per configured directory, one per skill), so a symlink leading
// out of the directory — or out of its skill — is an error, as is a path
// element that is not letters, digits, '.', '_' and '-' (so never `..`),
// a device, pipe or socket, a name that is not the directory's, a name
// in two directories. One bad skill fails the load, and the worker does
// not start: it serves the skills configured, or says why not.
//
// Held in memory, what an honest worker returns is what its manifest's
// digests describe, whatever happens on disk later; a changed skill is
// served after a restart, as a new version. No dispatcher compares a
// `skill` result with the pinned version's digests: the worker serving
// `skill` is trusted for what its calls return, as the worker of any
// tool is. The registry checks what it is told (below), not the content.
//
// # In the registry
//
// The `skill` tool's spec carries the manifests (ToolSpec.skills: name,
// description, version, and every file's path, size, SHA-256 and media
// type). The spec's version is the content hash of the whole spec, so a
// changed file of any skill is a new version of the tool; each skill's
// own version (Version: the digest of its files' paths and digests) says
// which skill changed. The registry checks what a worker announces of
// skills (CheckSpec, from registry.Check): a worker is not trusted to
// keep the bounds. Only the native tool `skill` carries skills (so no
// other tool, pool or spec file can put a listing of skills before
// callers under its name), every file's media type is a plain
// type/subtype, and what models are shown is tied to the manifests
// checked: the description must be Describe of them and the summary
// empty. The manifests together are at most MaxManifestBytes
// encoded (Load checks it too, so a worker never starts with skills the
// registry would refuse): the registry bucket keeps every version of a
// spec, and this bounds what one version of `skill` adds to it. Every replica of the pool serving `skill` must load
// the same skills, as for any spec: a replica holding another version
// refuses calls pinned to the version it does not serve.
//
// # Listed and loaded
//
// The tool's description lists every skill as `- name: description`,
// which is how a model learns of them from ListTools, the exports and
// MCP tools/list. The tool has no summary: those show a tool's summary
// instead of its description when it has one. A call {"name": "pdf"}
// returns the instructions (the Markdown after the front matter) and a
// second text block listing the skill's files; {"name": "pdf",
// "resource": "forms/fill.py"} returns that file as an embedded resource
// (URI skill://pdf/forms/fill.py; text for text files, else a blob). An
// unknown skill or file is NOT_FOUND. The tool is read-only, idempotent
// and closed-world.
//
// # The policy
//
// A rule names a skill through the call's arguments, as for any tool:
// `{effect: ask, tools: [skill], args: {name: "release-*"}}`, or CEL
// over `args.name` and `args.resource`; a grant made by approving a
// skill's call can be narrowed the same way (an argument pattern on
// name). No new policy concept was needed: the decision, its
// explanation, approvals, grants, the loop guard and budgets apply
// unchanged, and calls of other tools take no new step.
//
// # Later: MCP's Skills extension
//
// SEP-2640 (skills/list, skills/get, skill:// resources with digest and
// size) is not served yet. Its answers come from the same registry
// entry: skills/list from ToolSpec.skills, each file a skill:// resource
// (URI) with the manifest's sha256 and size, and reading one a call of
// `skill` with that resource, so the policy decides it as here.
package skills
