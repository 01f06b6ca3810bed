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
	"sync/atomic"
	"time"

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

// conformanceTools are the suite's fixture tools as toolwire tools;
// publish registers a spec (test_trigger_tool_change changes the tool
// list with it).
func conformanceTools(publish func(context.Context, *toolwirev1.ToolSpec) error) []*tool.Tool {
	var changes atomic.Int64
	return append([]*tool.Tool{
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
		tool.Must(tool.New("test_trigger_tool_change", func(ctx context.Context, _ none) (string, error) {
			// A new tool in the registry: every replica's list changes. No
			// worker serves it; named to sort last, as scenarios that call
			// "the first tool listed" must find one that runs.
			name := fmt.Sprintf("zz_added_tool_%d", changes.Add(1))
			t := tool.Must(tool.New(name, func(context.Context, none) (string, error) { return "added", nil },
				tool.WithDescription("Added by test_trigger_tool_change")))
			if err := publish(ctx, t.Spec()); err != nil {
				return "", err
			}
			return "added " + name, nil
		}, tool.WithDescription("Changes the tool list"))),
		tool.Must(tool.New("test_logging_tool", func(context.Context, none) (string, error) {
			return "nothing logged: the request set no log level", nil
		}, tool.WithDescription("Logs nothing unless asked"), tool.ReadOnly())),
	}, append(inputTools(), taskTools()...)...)
}

// taskAfter is how long the conformance endpoint waits before a call
// becomes a task; the task fixtures work for working longer (taskWork),
// so that which calls become tasks does not hang on the host's speed.
const (
	taskAfter = 2 * time.Second
	taskWork  = 3 * time.Second
)

// work sleeps d, or until ctx ends.
func work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// taskTools are the fixture tools of the suite's tasks scenarios.
func taskTools() []*tool.Tool {
	once := tool.WithRetryPolicy(&toolwirev1.RetryPolicy{MaxAttempts: 1})
	text := func(s string) *tool.Result { return &tool.Result{Content: []*toolwirev1.Content{tool.Text(s)}} }
	confirm := tool.Elicit("Confirm?", object(map[string]string{"confirm": "boolean"}))
	return []*tool.Tool{
		tool.Must(tool.New("greet", func(_ context.Context, in struct {
			Name string `json:"name"`
		}) (string, error) {
			return "Hello, " + in.Name + "!", nil
		}, tool.WithDescription("Greets, at once"), tool.WithTaskSupport(toolwirev1.TaskSupport_TASK_SUPPORT_FORBIDDEN))),
		tool.Must(tool.New("slow_compute", func(ctx context.Context, in struct {
			Seconds float64 `json:"seconds"`
			Label   string  `json:"label,omitempty"`
		}) (string, error) {
			if err := work(ctx, time.Duration(in.Seconds*float64(time.Second))+taskWork-taskAfter/2); err != nil {
				return "", err
			}
			return fmt.Sprintf("computed %s after %gs", in.Label, in.Seconds), nil
		}, tool.WithDescription("Works for a while"), once)),
		tool.Must(tool.New("failing_job", func(ctx context.Context, _ none) (string, error) {
			if err := work(ctx, taskWork); err != nil {
				return "", err
			}
			return "", tool.Permanent(errors.New("the job failed"))
		}, tool.WithDescription("Fails after a while"), once, tool.WithTaskSupport(toolwirev1.TaskSupport_TASK_SUPPORT_REQUIRED))),
		tool.Must(tool.New("protocol_error_job", func(ctx context.Context, _ none) (string, error) {
			if err := work(ctx, taskWork); err != nil {
				return "", err
			}
			panic("the job broke")
		}, tool.WithDescription("Breaks after a while"), once)),
		tool.Must(tool.New("confirm_delete", func(ctx context.Context, in struct {
			Filename string `json:"filename"`
		}) (*tool.Result, error) {
			var c struct{ Confirm bool }
			if a := tool.InputFrom(ctx); a != nil && a.PreviousCallID != "" {
				if ok, err := a.Elicited("confirm", &c); err == nil && ok && c.Confirm {
					return text("deleted " + in.Filename), nil
				}
				return text("kept " + in.Filename), nil
			}
			if err := work(ctx, taskWork); err != nil {
				return nil, err
			}
			return tool.NeedInput(map[string]tool.InputRequest{"confirm": tool.Elicit("Delete "+in.Filename+"?",
				object(map[string]string{"confirm": "boolean"}))}, nil), nil
		}, tool.WithDescription("Asks before it deletes, after a while"))),
		asking("multi_input", func(ctx context.Context, a *tool.Answers) (*tool.Result, error) {
			if _, ok := a.Responses["first"]; ok && a.PreviousCallID != "" {
				if _, ok := a.Responses["second"]; ok {
					return text("got both"), nil
				}
			}
			if err := work(ctx, taskWork); err != nil {
				return nil, err
			}
			return tool.NeedInput(map[string]tool.InputRequest{"first": confirm, "second": confirm}, nil), nil
		}),
		tool.Must(tool.New("test_tool_with_task", func(ctx context.Context, _ none) (*tool.Result, error) {
			var who struct{ Name string }
			if a := tool.InputFrom(ctx); a != nil {
				if ok, err := a.Elicited("user_name", &who); err == nil && ok {
					if err := work(ctx, taskWork); err != nil {
						return nil, err
					}
					return text("Hello, " + who.Name + ", from a task"), nil
				}
			}
			return tool.NeedInput(map[string]tool.InputRequest{
				"user_name": tool.Elicit("What is your name?", object(map[string]string{"name": "string"}))}, nil), nil
		}, tool.WithDescription("Asks, then works as a task"), tool.WithTaskSupport(toolwirev1.TaskSupport_TASK_SUPPORT_REQUIRED))),
	}
}

// object is a flat JSON Schema object of string or boolean properties, all
// required.
func object(props map[string]string) map[string]any {
	p, req := map[string]any{}, []string{}
	for name, typ := range props {
		p[name] = map[string]any{"type": typ}
		req = append(req, name)
	}
	return map[string]any{"type": "object", "properties": p, "required": req}
}

// asking is a fixture tool that asks for input: next returns the result
// once the answers it needs are in, or the input to ask for.
func asking(name string, next func(ctx context.Context, a *tool.Answers) (*tool.Result, error)) *tool.Tool {
	return tool.Must(tool.New(name, func(ctx context.Context, _ none) (*tool.Result, error) {
		a := tool.InputFrom(ctx)
		if a == nil {
			a = &tool.Answers{}
		}
		return next(ctx, a)
	}, tool.WithDescription("Asks its caller for input (SEP-2322)"), tool.ReadOnly()))
}

// inputTools are the suite's fixture tools of the input-required result
// scenarios and the stateless scenario's diagnostics.
func inputTools() []*tool.Tool {
	askName := tool.Elicit("What is your name?", object(map[string]string{"name": "string"}))
	elicitName := func(_ context.Context, a *tool.Answers) (*tool.Result, error) {
		var in struct{ Name string }
		if ok, err := a.Elicited("user_name", &in); err != nil || !ok {
			return tool.NeedInput(map[string]tool.InputRequest{"user_name": askName}, nil), nil
		}
		return &tool.Result{Content: []*toolwirev1.Content{tool.Text("Hello, " + in.Name + "!")}}, nil
	}
	text := func(s string) *tool.Result { return &tool.Result{Content: []*toolwirev1.Content{tool.Text(s)}} }
	return []*tool.Tool{
		asking("test_input_required_result_elicitation", elicitName),
		asking("test_input_required_result_sampling", func(_ context.Context, a *tool.Answers) (*tool.Result, error) {
			raw, ok := a.Responses["capital_question"]
			if !ok {
				return tool.NeedInput(map[string]tool.InputRequest{
					"capital_question": tool.Sample("What is the capital of France?", 100)}, nil), nil
			}
			var r struct {
				Content struct{ Text string } `json:"content"`
			}
			_ = json.Unmarshal(raw, &r)
			return text("The model answered: " + r.Content.Text), nil
		}),
		asking("test_input_required_result_list_roots", func(_ context.Context, a *tool.Answers) (*tool.Result, error) {
			raw, ok := a.Responses["client_roots"]
			if !ok {
				return tool.NeedInput(map[string]tool.InputRequest{"client_roots": tool.ListRoots()}, nil), nil
			}
			var r struct {
				Roots []struct{ URI string } `json:"roots"`
			}
			_ = json.Unmarshal(raw, &r)
			var uris []string
			for _, x := range r.Roots {
				uris = append(uris, x.URI)
			}
			return text("Roots: " + strings.Join(uris, ", ")), nil
		}),
		asking("test_input_required_result_request_state", func(_ context.Context, a *tool.Answers) (*tool.Result, error) {
			if _, ok := a.Responses["confirm"]; !ok {
				return tool.NeedInput(map[string]tool.InputRequest{
					"confirm": tool.Elicit("Please confirm", object(map[string]string{"ok": "boolean"}))}, []byte("round-1")), nil
			}
			if string(a.State) != "round-1" {
				return nil, tool.InvalidArgument("requestState", "not the state of round 1")
			}
			return text("state-ok: confirmed"), nil
		}),
		asking("test_input_required_result_multiple_inputs", func(_ context.Context, a *tool.Answers) (*tool.Result, error) {
			keys := []string{"user_name", "greeting", "client_roots"}
			for _, k := range keys {
				if _, ok := a.Responses[k]; !ok {
					return tool.NeedInput(map[string]tool.InputRequest{
						"user_name":    askName,
						"greeting":     tool.Sample("Generate a greeting", 50),
						"client_roots": tool.ListRoots(),
					}, []byte("multiple")), nil
				}
			}
			return text("Got all three answers"), nil
		}),
		asking("test_input_required_result_multi_round", func(_ context.Context, a *tool.Answers) (*tool.Result, error) {
			switch string(a.State) {
			case "round-1":
				var in struct{ Name string }
				if ok, err := a.Elicited("step1", &in); err == nil && ok {
					return tool.NeedInput(map[string]tool.InputRequest{"step2": tool.Elicit("Step 2: What is your favorite color?",
						object(map[string]string{"color": "string"}))}, []byte("round-2:"+in.Name)), nil
				}
			default:
				if name, ok := strings.CutPrefix(string(a.State), "round-2:"); ok {
					var in struct{ Color string }
					if ok, err := a.Elicited("step2", &in); err == nil && ok {
						return text(name + " likes " + in.Color), nil
					}
				}
			}
			return tool.NeedInput(map[string]tool.InputRequest{"step1": tool.Elicit("Step 1: What is your name?",
				object(map[string]string{"name": "string"}))}, []byte("round-1")), nil
		}),
		asking("test_input_required_result_tampered_state", func(_ context.Context, a *tool.Answers) (*tool.Result, error) {
			if string(a.State) == "signed" {
				return text("state verified"), nil
			}
			return tool.NeedInput(map[string]tool.InputRequest{
				"confirm": tool.Elicit("Please confirm", object(map[string]string{"ok": "boolean"}))}, []byte("signed")), nil
		}),
		asking("test_input_required_result_capabilities", func(ctx context.Context, a *tool.Answers) (*tool.Result, error) {
			if len(a.Responses) > 0 {
				return text("Thanks"), nil
			}
			ask := map[string]tool.InputRequest{}
			if tool.ClientCan(ctx, tool.MethodElicit) {
				ask["user_name"] = askName
			}
			if tool.ClientCan(ctx, tool.MethodSample) {
				ask["greeting"] = tool.Sample("Generate a greeting", 50)
			}
			if len(ask) == 0 {
				return text("The client can answer nothing: going on without input"), nil
			}
			return tool.NeedInput(ask, nil), nil
		}),
		// The stateless scenario's diagnostics: a tool that needs sampling
		// whatever the client declared (the endpoint refuses it -32021),
		// and one that asks for an elicitation (its answer is the only
		// frame of the response stream).
		asking("test_missing_capability", func(_ context.Context, a *tool.Answers) (*tool.Result, error) {
			if _, ok := a.Responses["sample"]; ok {
				return text("sampled"), nil
			}
			return tool.NeedInput(map[string]tool.InputRequest{"sample": tool.Sample("Say hello", 20)}, nil), nil
		}),
		asking("test_streaming_elicitation", elicitName),
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
			s.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "A prompt that asks for context first"},
				func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					if ans, ok := r.Params.InputResponses["user_context"].(*mcp.ElicitResult); ok && ans.Action == "accept" {
						return prompt(user(text(fmt.Sprintf("Use this context: %v", ans.Content["context"])))), nil
					}
					return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"user_context": &mcp.ElicitParams{
						Message:         "What context should the prompt use?",
						RequestedSchema: object(map[string]string{"context": "string"})}}}, nil
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
