package mcpcontent

import (
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// IconsFromMCP maps MCP icons onto toolwire's, in order; nil for none.
func IconsFromMCP(icons []sdk.Icon) []*toolwirev1.Icon {
	if len(icons) == 0 {
		return nil
	}
	out := make([]*toolwirev1.Icon, len(icons))
	for i, ic := range icons {
		out[i] = &toolwirev1.Icon{Src: ic.Source, MimeType: ic.MIMEType, Sizes: slices.Clone(ic.Sizes), Theme: string(ic.Theme)}
	}
	return out
}

// IconsToMCP is the inverse of IconsFromMCP.
func IconsToMCP(icons []*toolwirev1.Icon) []sdk.Icon {
	if len(icons) == 0 {
		return nil
	}
	out := make([]sdk.Icon, len(icons))
	for i, ic := range icons {
		out[i] = sdk.Icon{Source: ic.GetSrc(), MIMEType: ic.GetMimeType(), Sizes: slices.Clone(ic.GetSizes()), Theme: sdk.IconTheme(ic.GetTheme())}
	}
	return out
}
