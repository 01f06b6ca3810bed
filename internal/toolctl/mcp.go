package toolctl

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) mcpCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Connect MCP clients to this toolwire installation",
	}
	var withKey bool
	var name string
	config := &cobra.Command{
		Use:   "config",
		Short: "Print what an MCP client needs to use every tool of the installation",
		Long: `Print the snippet that adds this installation's MCP endpoint (<server>/mcp,
docs/mcp.md) to an MCP client: the JSON entry of an "mcpServers" file (Claude
Desktop, Cursor, VS Code and most clients), and the command that adds it to
Claude Code. The API key is left as ${TOOLWIRE_API_KEY} unless --with-key
prints the one toolctl uses: a snippet with a key in it is a secret.`,
		Example: `  toolctl mcp config
  toolctl --server https://toolwire.example.com mcp config --name tools`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			url := strings.TrimSuffix(a.server, "/") + "/mcp"
			key := "${TOOLWIRE_API_KEY}"
			if withKey {
				if a.apiKey == "" {
					return fmt.Errorf("--with-key: toolctl has no API key (--api-key or TOOLWIRE_API_KEY)")
				}
				key = a.apiKey
			}
			entry := map[string]any{"type": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer " + key}}
			snippet := map[string]any{"mcpServers": map[string]any{name: entry}}
			if a.json() {
				return json.NewEncoder(a.io.Stdout).Encode(snippet)
			}
			b, err := json.MarshalIndent(snippet, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintf(a.io.Stdout, "# An \"mcpServers\" entry (Claude Desktop, Cursor, VS Code, ...):\n%s\n\n", b)
			fmt.Fprintf(a.io.Stdout, "# Claude Code:\nclaude mcp add --transport http %s %s --header \"Authorization: Bearer %s\"\n\n", name, url, key)
			fmt.Fprintf(a.io.Stdout, "# The MCP Inspector:\nnpx @modelcontextprotocol/inspector --cli %s --transport http --header \"Authorization: Bearer %s\" --method tools/list\n", url, key)
			return nil
		},
	}
	config.Flags().BoolVar(&withKey, "with-key", false, "print toolctl's API key instead of ${TOOLWIRE_API_KEY}")
	config.Flags().StringVar(&name, "name", "toolwire", "the server's name in the client")
	cmd.AddCommand(config)
	return cmd
}
