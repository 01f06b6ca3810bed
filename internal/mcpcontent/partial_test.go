package mcpcontent_test

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/mcpcontent"
)

// meta decodes a notification's _meta from JSON, as the SDK hands it over.
func meta(t *testing.T, s string) sdk.Meta {
	t.Helper()
	var m sdk.Meta
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return m
}

func TestPartialFromMeta(t *testing.T) {
	t.Parallel()
	blocks, err := mcpcontent.PartialFromMeta(meta(t, `{"io.toolwire/partial":{"seq":2,"attempt":1,"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}`))
	require.NoError(t, err)
	require.Len(t, blocks, 2)
	require.Equal(t, "a", blocks[0].GetText().GetText())
	require.Equal(t, "b", blocks[1].GetText().GetText())

	blocks, err = mcpcontent.PartialFromMeta(meta(t, `{"other":1}`))
	require.NoError(t, err)
	require.Nil(t, blocks, "no partial output: plain progress")
	blocks, err = mcpcontent.PartialFromMeta(nil)
	require.NoError(t, err)
	require.Nil(t, blocks)
}

func TestPartialFromMetaRefuses(t *testing.T) {
	t.Parallel()
	big := `{"io.toolwire/partial":{"content":[{"type":"text","text":"` + strings.Repeat("x", 300<<10) + `"}]}}`
	for name, s := range map[string]string{
		"not an object":  `{"io.toolwire/partial":"text"}`,
		"no content":     `{"io.toolwire/partial":{"seq":1}}`,
		"null":           `{"io.toolwire/partial":null}`,
		"unknown kind":   `{"io.toolwire/partial":{"content":[{"type":"tool_use","id":"x","name":"y","input":{}}]}}`,
		"content object": `{"io.toolwire/partial":{"content":{"type":"text"}}}`,
		"over the bound": big,
	} {
		_, err := mcpcontent.PartialFromMeta(meta(t, s))
		require.Error(t, err, name)
	}
}
