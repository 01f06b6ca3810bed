// Package mcpcontent maps MCP content blocks (the official Go SDK's
// mcp.Content) onto toolwire's (toolwirev1.Content) and back: the one
// mapping the MCP executor (what an MCP server answers), the MCP server
// face (what a tools/call answers) and the after-hooks (the response a hook
// looks at, and the content it gives back) share.
//
// # Blocks
//
// Blocks map one to one, in both directions (FromMCP, ToMCP): text, image,
// audio (decoded bytes), resource link (with its icons), embedded resource
// (text or blob, with its own `_meta` as EmbeddedResource.meta_json),
// annotations (audience, priority, lastModified) and each block's `_meta`
// as Content.meta_json. Nothing is flattened to text.
// ToMCP(FromMCP(x)) equals x for every block kind toolwire holds.
//
// FromMCP refuses a kind toolwire has no block for (sampling's tool_use
// and tool_result, which are not valid in tool results) rather than
// dropping or flattening it; ToMCP refuses a block with no kind. Both name
// the index of the block they refuse.
//
// # Priority 0
//
// The SDK's Annotations cannot tell a priority of 0 from none: FromMCP
// keeps a priority only when it is not 0, and ZeroPriorities restores the
// zeros from the JSON the blocks were decoded from. ToMCP cannot write a
// priority of 0 back (the SDK omits it): internal/mcpserver writes it
// back into the JSON of its tool results.
//
// # Icons and _meta
//
// IconsFromMCP and IconsToMCP map icons in order (a resource link's, and a
// tool's). MetaJSON encodes an MCP `_meta` as toolwire keeps it (empty for
// none).
package mcpcontent
