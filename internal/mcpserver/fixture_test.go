package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The conformance suite's fixtures (the "everything server" its server
// scenarios name). The tools are toolwire tools, run by a worker through
// NATS like any other; the prompts, resources and completions are the
// endpoint's Extra (toolwire's fleet has none of its own).

// pngPixel is a 1x1 PNG.
var pngPixel = func() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

// wavSilence is a WAV file of 8 samples of silence (8 kHz, 8-bit mono).
var wavSilence = func() []byte {
	var b bytes.Buffer
	samples := bytes.Repeat([]byte{128}, 8)
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(36+len(samples)))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(8000), uint32(8000), uint16(1), uint16(8)} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	_ = binary.Write(&b, binary.LittleEndian, uint32(len(samples)))
	b.Write(samples)
	return b.Bytes()
}()

type none struct{}

func embedded(uri, text string) *toolwirev1.Content {
	return &toolwirev1.Content{Kind: &toolwirev1.Content_Resource{Resource: &toolwirev1.EmbeddedResource{
		Uri: uri, MimeType: "text/plain", Contents: &toolwirev1.EmbeddedResource_Text{Text: text}}}}
}

func audio(data []byte, mime string) *toolwirev1.Content {
	return &toolwirev1.Content{Kind: &toolwirev1.Content_Audio{Audio: &toolwirev1.AudioContent{Data: data, MimeType: mime}}}
}

func fixed(name, description string, content ...*toolwirev1.Content) *tool.Tool {
	return tool.Must(tool.New(name, func(context.Context, none) (*tool.Result, error) {
		return &tool.Result{Content: content}, nil
	}, tool.WithDescription(description), tool.ReadOnly(), tool.Idempotent()))
}

// conformanceTools are the suite's fixture tools as toolwire tools.
func conformanceTools() []*tool.Tool {
	return []*tool.Tool{
		fixed("test_simple_text", "Returns a simple text response", tool.Text("This is a simple text response for testing.")),
		fixed("test_image_content", "Returns an image", tool.Image(pngPixel, "image/png")),
		fixed("test_audio_content", "Returns audio", audio(wavSilence, "audio/wav")),
		fixed("test_embedded_resource", "Returns an embedded resource",
			embedded("test://embedded-resource", "This is an embedded resource")),
		fixed("test_multiple_content_types", "Returns text, an image and a resource",
			tool.Text("This is text content"), tool.Image(pngPixel, "image/png"),
			embedded("test://embedded-in-multiple", "This is an embedded resource")),
		tool.Must(tool.New("test_tool_with_progress", func(ctx context.Context, _ none) (string, error) {
			for _, p := range []float64{0, 50, 100} {
				tool.Progress(ctx, fmt.Sprintf("Completed step %.0f of 100", p), p)
			}
			return "progress reported", nil
		}, tool.WithDescription("Reports progress three times"), tool.ReadOnly())),
		tool.Must(tool.New("test_error_handling", func(context.Context, none) (string, error) {
			return "", tool.Permanent(errors.New("this tool intentionally returns an error for testing"))
		}, tool.WithDescription("Always fails"), tool.ReadOnly())),
	}
}

// conformanceExtra are the suite's fixture prompts, resources and
// completions.
func conformanceExtra() *mcpserver.Extra {
	text := func(s string) *mcp.TextContent { return &mcp.TextContent{Text: s} }
	prompt := func(msgs ...*mcp.PromptMessage) *mcp.GetPromptResult { return &mcp.GetPromptResult{Messages: msgs} }
	user := func(c mcp.Content) *mcp.PromptMessage { return &mcp.PromptMessage{Role: "user", Content: c} }
	return &mcpserver.Extra{
		Setup: func(s *mcp.Server) {
			s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Description: "A simple prompt without arguments"},
				func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return prompt(user(text("This is a simple prompt for testing."))), nil
				})
			s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with two arguments",
				Arguments: []*mcp.PromptArgument{
					{Name: "arg1", Description: "First test argument", Required: true},
					{Name: "arg2", Description: "Second test argument", Required: true}}},
				func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					a := r.Params.Arguments
					return prompt(user(text(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])))), nil
				})
			s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt embedding a resource",
				Arguments: []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
				func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return prompt(
						user(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: r.Params.Arguments["resourceUri"],
							MIMEType: "text/plain", Text: "Embedded resource content for testing."}}),
						user(text("Please process the embedded resource above."))), nil
				})
			s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image"},
				func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return prompt(user(&mcp.ImageContent{Data: pngPixel, MIMEType: "image/png"}),
						user(text("Please analyze the image above."))), nil
				})
			s.AddResource(&mcp.Resource{Name: "static-text", URI: "test://static-text", MIMEType: "text/plain",
				Description: "A static text resource"},
				func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://static-text",
						MIMEType: "text/plain", Text: "This is the content of the static text resource."}}}, nil
				})
			s.AddResource(&mcp.Resource{Name: "static-binary", URI: "test://static-binary", MIMEType: "image/png",
				Description: "A static binary resource"},
				func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://static-binary",
						MIMEType: "image/png", Blob: pngPixel}}}, nil
				})
			s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "template", URITemplate: "test://template/{id}/data",
				MIMEType: "application/json", Description: "A resource template"},
				func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					uri := r.Params.URI
					id, ok := strings.CutPrefix(uri, "test://template/")
					id, ok2 := strings.CutSuffix(id, "/data")
					if !ok || !ok2 || id == "" {
						return nil, mcp.ResourceNotFoundError(uri)
					}
					b, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
					if err != nil {
						return nil, err
					}
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri,
						MIMEType: "application/json", Text: string(b)}}}, nil
				})
		},
		Complete: func(_ context.Context, r *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			if r.Params == nil || r.Params.Argument.Name == "" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion needs an argument"}
			}
			var values []string
			for _, v := range []string{"paris", "park", "party"} {
				if strings.HasPrefix(v, r.Params.Argument.Value) {
					values = append(values, v)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: append([]string{}, values...),
				Total: len(values)}}, nil
		},
	}
}
