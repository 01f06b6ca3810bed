package mcpcontent_test

import (
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/mcpcontent"
)

// Every MCP content block maps to exactly one toolwire block, with its
// annotations and `_meta`.
func ExampleFromMCP() {
	blocks, err := mcpcontent.FromMCP([]sdk.Content{
		&sdk.TextContent{Text: "see attached", Annotations: &sdk.Annotations{Audience: []sdk.Role{"user"}}},
		&sdk.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png", Meta: sdk.Meta{"source": "camera"}},
		&sdk.ResourceLink{URI: "file:///report.pdf", Name: "report.pdf"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, b := range blocks {
		switch {
		case b.GetText() != nil:
			fmt.Println("text:", b.GetText().GetText(), b.GetAnnotations().GetAudience())
		case b.GetImage() != nil:
			fmt.Println("image:", b.GetImage().GetMimeType(), len(b.GetImage().GetData()), "bytes", b.GetMetaJson())
		case b.GetResourceLink() != nil:
			fmt.Println("link:", b.GetResourceLink().GetUri())
		}
	}
	// Output:
	// text: see attached [user]
	// image: image/png 4 bytes {"source":"camera"}
	// link: file:///report.pdf
}
