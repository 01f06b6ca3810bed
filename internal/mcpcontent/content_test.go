package mcpcontent_test

import (
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/mcpcontent"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestContentRoundTrip(t *testing.T) {
	t.Parallel()
	size := int64(42)
	ann := &sdk.Annotations{Audience: []sdk.Role{"user", "assistant"}, Priority: 0.5, LastModified: "2026-01-02T03:04:05Z"}
	meta := sdk.Meta{"k": "v", "n": float64(1)}
	blocks := []sdk.Content{
		&sdk.TextContent{Text: "héllo\n\"q\"", Meta: meta, Annotations: ann},
		&sdk.TextContent{Text: ""},
		&sdk.ImageContent{Data: fixturePNG, MIMEType: "image/png", Annotations: ann},
		&sdk.AudioContent{Data: fixtureWAV, MIMEType: "audio/wav", Meta: meta},
		&sdk.ResourceLink{URI: "file:///a.txt", Name: "a.txt", Title: "A", Description: "an a", MIMEType: "text/plain", Size: &size, Meta: meta, Annotations: ann},
		&sdk.ResourceLink{URI: "https://x.example/b", Name: "b", Icons: fixtureIcons},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///t.txt", MIMEType: "text/plain", Text: "text", Meta: sdk.Meta{"r": true}}, Meta: meta, Annotations: ann},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///b.bin", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2, 255}}},
	}
	tw, err := mcpcontent.FromMCP(blocks)
	require.NoError(t, err)
	require.Len(t, tw, len(blocks), "one toolwire block per MCP block")

	require.Equal(t, "héllo\n\"q\"", tw[0].GetText().GetText())
	require.JSONEq(t, `{"k":"v","n":1}`, tw[0].MetaJson)
	require.Equal(t, []string{"user", "assistant"}, tw[0].Annotations.Audience)
	require.InDelta(t, 0.5, tw[0].Annotations.GetPriority(), 0)
	require.Equal(t, fixturePNG, tw[2].GetImage().Data)
	require.Equal(t, "audio/wav", tw[3].GetAudio().MimeType)
	require.Equal(t, int64(42), tw[4].GetResourceLink().GetSize())
	require.Len(t, tw[5].GetResourceLink().GetIcons(), 2, "a resource link's icons")
	require.Equal(t, []string{"48x48", "96x96"}, tw[5].GetResourceLink().GetIcons()[0].GetSizes())
	require.Equal(t, "text", tw[6].GetResource().GetText())
	require.JSONEq(t, `{"r":true}`, tw[6].GetResource().MetaJson)
	require.Equal(t, []byte{0, 1, 2, 255}, tw[7].GetResource().GetBlob())

	back, err := mcpcontent.ToMCP(tw)
	require.NoError(t, err)
	require.Len(t, back, len(blocks))
	for i := range blocks {
		want, err := json.Marshal(blocks[i])
		require.NoError(t, err)
		got, err := json.Marshal(back[i])
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got), "block %d survives MCP -> toolwire -> MCP", i)
	}

	again, err := mcpcontent.FromMCP(back)
	require.NoError(t, err)
	for i := range tw {
		require.True(t, proto.Equal(tw[i], again[i]), "block %d survives toolwire -> MCP -> toolwire", i)
	}
}

func TestFromMCPRefusesWhatItCannotHold(t *testing.T) {
	t.Parallel()
	//lint:ignore SA1019 sampling content is exactly what must be refused
	_, err := mcpcontent.FromMCP([]sdk.Content{&sdk.TextContent{Text: "ok"}, &sdk.ToolUseContent{ID: "x", Name: "y"}})
	require.ErrorContains(t, err, "content block 1")
	_, err = mcpcontent.ToMCP([]*toolwirev1.Content{{}})
	require.ErrorContains(t, err, "no kind")
}

// fixturePNG and fixtureWAV stand for an image's and a sound's bytes.
var fixturePNG, fixtureWAV = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 255}, []byte("RIFF\x24\x00\x00\x00WAVEfmt ")

// fixtureIcons are a resource link's icons.
var fixtureIcons = []sdk.Icon{
	{Source: "https://toolwire.example/icon.png", MIMEType: "image/png", Sizes: []string{"48x48", "96x96"}, Theme: sdk.IconThemeLight},
	{Source: "data:image/svg+xml;base64,PHN2Zy8+", Sizes: []string{"any"}},
}
