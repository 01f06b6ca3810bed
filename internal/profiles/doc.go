// Package profiles renders tool lists and results for the kind of client
// that asks for them (docs/mcp.md, "Client profiles"): a profile says
// which `_meta` keys pass to its clients, what replaces the content blocks
// they cannot show, and whether the tool's widget meta is generated for
// them. The faces apply it at the edge (internal/mcpserver for MCP
// clients, the Connect API on request); tools never see the client and
// never branch on it. The package holds no I/O but reading a profiles
// file.
//
// # Profiles
//
// A Profile has a name, Match rules on what an MCP client declares of
// itself (its clientInfo name, as case-insensitive path.Match patterns,
// and capabilities it must all declare, "extensions/<name>" for an
// extension), MetaRules (Allow: when given, only the matching keys pass;
// Deny: the matching keys never pass; a pattern is a key, "ns/*" or "*")
// and Fallbacks (image, audio, resource_link, embedded_resource: "text"
// replaces such a block by a text block describing it; structured: "text"
// adds the structured content as a JSON text block to a result without a
// text block). The protocol's and toolwire's own keys
// (io.modelcontextprotocol/*, io.toolwire/*) always pass: a client needs
// the call id, and toolwire's error details, whatever its profile.
// ChatGPT's keys (openai/*) pass only to a profile that asks for them
// (Widgets "openai", or an Allow pattern starting "openai/"; "*" is not
// enough): they are kept from every other client by default, not by each
// profile's deny rule, so an operator's profile without meta rules does
// not leak them.
//
// Widgets "openai" writes the widget meta of ChatGPT's Apps SDK from the
// tool's spec: ToolSpec.ui_template as openai/outputTemplate in the
// tool's `_meta` in tools/list, unless the profile's Deny names it. A key
// of that name the tool wrote itself is dropped for every profile (and
// registry.Check refuses it in a spec): a tool says what its widget is,
// the profile says in which client's words.
//
// # Shipped profiles
//
// chatgpt (clientInfo names openai-mcp, chatgpt*, openai*; everything
// passes; widget meta), claude (claude*; no openai/*; structured content
// as text when the result has no text block), vscode (visual studio
// code*, vscode*, *copilot*; no openai/*), cursor (cursor*; no openai/*;
// audio and resource links as text) and plain (no match rules: the
// default; no openai/*, nothing else changed). Their fallbacks are a
// starting point, to be checked against each client's release: an
// operator's file replaces any of them by name.
//
// # Matching
//
// Deterministic: the operator's profiles in the file's order, then the
// shipped ones it does not replace; the first whose every rule holds
// wins; a profile without match rules matches no client (reached by name
// or as the default); no match is the default (File.Default, "plain"
// unless named). Set.Select takes a profile by name, as the faces'
// Toolwire-Client-Profile header does: only the configured names, an
// unknown one is ErrUnknown (not listing the configured names: they are
// the operator's, the caller any tenant's).
//
// Bounded: a client's name longer than MaxClientName matches no
// client_names rule (the faces cut it with ClientName before matching),
// the faces consider at most MaxCapabilities capabilities, and Match
// prepares the name once; the patterns are prepared when the Set is
// built, at most 64 of at most 256 bytes per list. Matching costs at most
// about name length × pattern length per pattern.
//
// # The profiles file
//
// YAML or JSON (File), at most MaxFileBytes, unknown keys refused, every
// profile validated (Profile.Validate: the name's rule, at most 64
// patterns of at most 256 bytes in a list, patterns that compile,
// fallbacks "" or "text"; the fields checked in a fixed order, so an
// invalid profile gets the same error each time), names unique, at most 64 profiles, a default
// that names one. An invalid file is refused whole, naming the field:
// nothing is silently fixed. docs/examples/profiles.yaml is loaded by a
// test.
//
// # Rendering
//
// Profile.ToolMeta renders a tool's `_meta` (tools/list) and
// Profile.Response a call's response (a copy: the result's `_meta`, each
// block's and each embedded resource's, and the fallbacks); both pass
// everything unchanged for a nil profile (the Connect API without the
// header). A `_meta` that is not a JSON object is dropped (nothing
// unfiltered reaches a client). Profile.InputParams renders an input
// request's params: their `_meta`, and a sampling request's messages' and
// their content blocks'.
package profiles
