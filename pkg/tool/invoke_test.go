package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type item struct {
	Name  string `json:"name"`
	Count int8   `json:"count"`
}

type orderIn struct {
	Customer string          `json:"customer"`
	Items    []item          `json:"items"`
	ByID     map[string]item `json:"by_id,omitempty"`
	Note     struct {
		Urgent bool `json:"urgent"`
	} `json:"note"`
}

func TestInvokeDecodeErrors(t *testing.T) {
	t.Parallel()

	called := false
	tl := tool.Must(tool.New("order", func(context.Context, orderIn) (string, error) {
		called = true
		return "", nil
	}))

	for _, tt := range []struct {
		name      string
		args      string
		wantField string
		wantMsg   string
	}{
		{"top-level field", `{"customer":42}`, "/customer", "want string, got number"},
		{"nested struct field", `{"note":{"urgent":"yes"}}`, "/note/urgent", "want boolean, got string"},
		{"array element field", `{"items":[{"name":"a","count":1},{"name":"b","count":"two"}]}`, "/items/1/count", "want integer, got string"},
		{"out of range", `{"items":[{"name":"a","count":300}]}`, "/items/0/count", "want integer, got number 300"},
		{"fraction for integer", `{"items":[{"count":1.5}]}`, "/items/0/count", "want integer, got number 1.5"},
		{"map value field", `{"by_id":{"x/y":{"name":7}}}`, "/by_id/x~1y/name", "want string, got number"},
		{"case-insensitive key", `{"CUSTOMER":true}`, "/CUSTOMER", "want string, got bool"},
		{"wrong kind for array", `{"items":{}}`, "/items", "want array, got object"},
		{"not an object", `[1,2]`, "", "want object, got array"},
		{"not JSON", `{"customer":`, "", "not valid JSON"},
		{"trailing garbage", `{} {}`, "", "not valid JSON"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := tl.Invoke(context.Background(), []byte(tt.args))
			require.Nil(t, res)
			var te *tool.Error
			require.ErrorAs(t, err, &te)
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.Type)
			require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.SideEffects)
			require.False(t, te.Retryable)
			require.Len(t, te.Violations, 1)
			require.Equal(t, tt.wantField, te.Violations[0].GetField())
			require.Contains(t, te.Violations[0].GetMessage(), tt.wantMsg)
			require.Contains(t, te.Message, tt.wantMsg)
		})
	}
	require.False(t, called, "the function never runs on undecodable arguments")
}

func TestInvokeDecodesArguments(t *testing.T) {
	t.Parallel()

	got := make(chan orderIn, 1)
	tl := tool.Must(tool.New("order", func(_ context.Context, in orderIn) (string, error) {
		got <- in
		return "ok", nil
	}))
	_, err := tl.Invoke(context.Background(), []byte(`{"customer":"c","items":[{"name":"a","count":2}],"note":{"urgent":true}}`))
	require.NoError(t, err)
	in := <-got
	require.Equal(t, "c", in.Customer)
	require.Equal(t, []item{{Name: "a", Count: 2}}, in.Items)
	require.True(t, in.Note.Urgent)
}

func TestInvokeEmptyArgumentsAreAnEmptyObject(t *testing.T) {
	t.Parallel()

	tl := tool.Must(tool.New("order", func(_ context.Context, in orderIn) (string, error) {
		return "customer=" + in.Customer, nil
	}))
	for _, args := range []string{"", " \n", "{}"} {
		res, err := tl.Invoke(context.Background(), []byte(args))
		require.NoError(t, err, "args %q", args)
		require.Equal(t, "customer=", res.Content[0].GetText().GetText())
	}
}

func TestInvokeRawMessageGetsExactBytes(t *testing.T) {
	t.Parallel()

	tl := tool.Must(tool.New("raw", func(_ context.Context, in json.RawMessage) (string, error) {
		return string(in), nil
	}))
	// Big integers, key order, duplicate keys and spacing all survive.
	args := `{ "b": 12345678901234567890123, "a": [1.0e2, "\u00e9"], "a": null }`
	res, err := tl.Invoke(context.Background(), []byte(args))
	require.NoError(t, err)
	require.Equal(t, args, res.Content[0].GetText().GetText())
}

type report struct {
	Title string `json:"title"`
	Rows  int    `json:"rows"`
}

// ToolContent makes report choose its own blocks.
func (r report) ToolContent() []*toolwirev1.Content {
	return []*toolwirev1.Content{tool.Text(r.Title), tool.Image([]byte{1, 2}, "image/png")}
}

func TestInvokeOutputConversion(t *testing.T) {
	t.Parallel()

	shared := &tool.Result{Content: []*toolwirev1.Content{tool.Text("shared")}, Structured: []byte(`{"s":1}`)}
	for _, tt := range []struct {
		name string
		tool *tool.Tool
		want *tool.Result
	}{
		{
			name: "struct is structured JSON and a text block of it",
			tool: tool.Must(tool.New("t", search)),
			want: &tool.Result{Content: []*toolwirev1.Content{tool.Text(`{"hits":["q"]}`)}, Structured: []byte(`{"hits":["q"]}`)},
		},
		{
			name: "pointer to struct",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (*searchOut, error) { return &searchOut{Hits: []string{}}, nil })),
			want: &tool.Result{Content: []*toolwirev1.Content{tool.Text(`{"hits":[]}`)}, Structured: []byte(`{"hits":[]}`)},
		},
		{
			name: "nil pointer is an empty result",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (*searchOut, error) { return nil, nil })),
			want: &tool.Result{},
		},
		{
			name: "string is one text block without structured output",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (string, error) { return "plain", nil })),
			want: &tool.Result{Content: []*toolwirev1.Content{tool.Text("plain")}},
		},
		{
			name: "number",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (float64, error) { return 2.5, nil })),
			want: &tool.Result{Content: []*toolwirev1.Content{tool.Text(`2.5`)}, Structured: []byte(`2.5`)},
		},
		{
			name: "content provider chooses the blocks",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (report, error) { return report{Title: "T", Rows: 3}, nil })),
			want: &tool.Result{
				Content:    []*toolwirev1.Content{tool.Text("T"), tool.Image([]byte{1, 2}, "image/png")},
				Structured: []byte(`{"title":"T","rows":3}`),
			},
		},
		{
			name: "result pointer is used as is",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (*tool.Result, error) { return shared, nil })),
			want: &tool.Result{Content: []*toolwirev1.Content{tool.Text("shared")}, Structured: []byte(`{"s":1}`)},
		},
		{
			name: "nil result pointer is an empty result",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (*tool.Result, error) { return nil, nil })),
			want: &tool.Result{},
		},
		{
			name: "result value",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (tool.Result, error) {
				return tool.Result{Content: []*toolwirev1.Content{tool.Text("v")}}, nil
			})),
			want: &tool.Result{Content: []*toolwirev1.Content{tool.Text("v")}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.tool.Invoke(context.Background(), []byte(`{"query":"q","exact":false}`))
			require.NoError(t, err)
			requireResult(t, tt.want, got)
		})
	}
}

func TestInvokeUnencodableOutputIsInternal(t *testing.T) {
	t.Parallel()

	tl := tool.Must(tool.New("t", func(context.Context, searchIn) (map[string]any, error) {
		return map[string]any{"f": func() {}}, nil
	}))
	_, err := tl.Invoke(context.Background(), nil)
	var te *tool.Error
	require.ErrorAs(t, err, &te)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, te.Type)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE, te.SideEffects)
	require.False(t, te.Retryable)
}

// requireResult compares results, their proto messages with proto.Equal.
func requireResult(t *testing.T, want, got *tool.Result) {
	t.Helper()
	require.NotNil(t, got)
	require.Len(t, got.Content, len(want.Content))
	for i := range want.Content {
		require.True(t, proto.Equal(want.Content[i], got.Content[i]), "content %d: want %v, got %v", i, want.Content[i], got.Content[i])
	}
	if want.Structured == nil {
		require.Nil(t, got.Structured)
	} else {
		require.JSONEq(t, string(want.Structured), string(got.Structured))
	}
	require.Len(t, got.Intents, len(want.Intents))
	for i := range want.Intents {
		require.True(t, proto.Equal(want.Intents[i], got.Intents[i]), "intent %d: want %v, got %v", i, want.Intents[i], got.Intents[i])
	}
}

var errFailed = errors.New("failed")
