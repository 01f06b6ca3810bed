package dispatchd

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/internal/workerconfig"
)

// EverythingIndex is where `make mcp-everything` installs the MCP
// reference server's entry point, relative to the repository root.
const EverythingIndex = "testdata/mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

// defaultSpecs holds the example spec files the default configuration
// serves (defaultspecs/*.yaml), embedded so that `dispatcher` with no
// flags serves them from any directory.
//
//go:embed defaultspecs/*.yaml
var defaultSpecs embed.FS

// defaultSpecDir is defaultSpecs' directory of spec files.
const defaultSpecDir = "defaultspecs"

// defaultWorkers is the configuration of the in-process workers when none
// is given: the built-in examples of every executor type — the sandbox and
// HTTP tools of defaultspecs (the HTTP one calls this dispatcher's API at
// httpAddr, so it works offline) and, when Node.js and the reference
// server are installed, the MCP reference server over stdio. What it
// leaves out, it says at Info.
func defaultWorkers(httpAddr string, log *slog.Logger) (*workerconfig.File, []workerconfig.SpecDir) {
	f := &workerconfig.File{Vars: map[string]string{}}
	if host, port, err := net.SplitHostPort(httpAddr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		f.Vars["TOOLWIRE_HTTP"] = "http://" + net.JoinHostPort(host, port)
		f.Vars["TOOLWIRE_HTTP_PORT"] = port
	}
	if srv, err := everything(); err != nil {
		log.Info("MCP reference server not served", "why", err.Error(),
			"fix", "install Node.js and run `make mcp-everything`, or set TOOLWIRE_MCP_EVERYTHING to its dist/index.js")
	} else {
		f.MCP.Servers = []mcp.ServerConfig{srv}
	}
	return f, []workerconfig.SpecDir{{FS: defaultSpecs, Dir: defaultSpecDir}}
}

// everything is the reference server's config, if it can run here.
func everything() (mcp.ServerConfig, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return mcp.ServerConfig{}, errors.New("node is not on PATH")
	}
	index := cmp.Or(os.Getenv("TOOLWIRE_MCP_EVERYTHING"), EverythingIndex)
	if index, err = filepath.Abs(index); err != nil {
		return mcp.ServerConfig{}, err
	}
	if _, err := os.Stat(index); err != nil {
		return mcp.ServerConfig{}, fmt.Errorf("the reference server is not installed at %s", index)
	}
	return mcp.ServerConfig{Name: "everything",
		Stdio: &mcp.StdioConfig{Command: node, Args: []string{index, "stdio"}, Dir: filepath.Dir(index)}}, nil
}
