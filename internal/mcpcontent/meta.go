package mcpcontent

import (
	"encoding/json"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MetaJSON encodes an MCP `_meta` as toolwire keeps it (meta_json); empty
// for none. It returns the encoding's error for a value JSON cannot hold.
func MetaJSON(m sdk.Meta) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// metaFromJSON is the inverse of MetaJSON.
func metaFromJSON(s string) (sdk.Meta, error) {
	if s == "" {
		return nil, nil
	}
	var m sdk.Meta
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	return m, nil
}
