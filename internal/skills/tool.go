package skills

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ToolName is the name of the one tool that loads skills.
const ToolName = "skill"

// URIScheme is the scheme of a skill's files as resources:
// skill://<name>/<path>, the form of MCP's Skills extension.
const URIScheme = "skill://"

// Args are the `skill` tool's arguments. A policy rule names a skill by
// them: `tools: [skill], args: {name: pdf}` (docs/skills.md).
type Args struct {
	Name     string `json:"name" jsonschema:"the name of the skill to load, as this tool's description lists it"`
	Resource string `json:"resource,omitempty" jsonschema:"a file of the skill to read (its path, as the skill's instructions and resource list give it); leave out to load the instructions"`
}

// Tool returns the `skill` tool serving set: its description lists every
// skill by name and description, its spec carries the manifests
// (ToolSpec.skills, so the spec's version changes when any skill does),
// and a call returns a skill's instructions, or one of its files.
func Tool(set *Set) (*tool.Tool, error) {
	ms := set.Manifests()
	return tool.New(ToolName, set.load,
		tool.WithTitle("Skills"),
		tool.WithDescription(Describe(ms)),
		tool.WithCategory(toolwirev1.ToolCategory_TOOL_CATEGORY_RETRIEVAL),
		tool.ReadOnly(), tool.Idempotent(), tool.OpenWorld(false),
		tool.Option(func(s *toolwirev1.ToolSpec) { s.Skills = ms }),
	)
}

// Describe returns the `skill` tool's description for the skills ms (in
// their order): what the tool does, then each skill as `- name:
// description`. The tool has no summary: the exports and MCP show a
// tool's summary in place of its description when it has one, and the
// list of skills is what a model must always see.
func Describe(ms []*toolwirev1.Skill) string {
	var b strings.Builder
	b.WriteString("Loads a skill: instructions for a kind of task, with files (scripts, references, templates) " +
		"they may name. When a task matches a skill's description, load the skill with its name before you " +
		"start, and follow its instructions; load one of its files with `resource` set to the file's path.\n\nSkills:\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "- %s: %s\n", m.GetName(), strings.Join(strings.Fields(m.GetDescription()), " "))
	}
	return b.String()
}

// load is the tool's function.
func (s *Set) load(_ context.Context, in Args) (*tool.Result, error) {
	sk, ok := s.Get(in.Name)
	if !ok {
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
			Message:     fmt.Sprintf("no skill %.80q", in.Name),
			Suggestion:  "use a name this tool's description lists",
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
	}
	if in.Resource == "" {
		return &tool.Result{Content: []*toolwirev1.Content{tool.Text(sk.instructions), tool.Text(sk.resourceList())}}, nil
	}
	for _, f := range sk.manifest.GetFiles() {
		if f.GetPath() == in.Resource {
			return &tool.Result{Content: []*toolwirev1.Content{sk.resource(f)}}, nil
		}
	}
	return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
		Message:     fmt.Sprintf("skill %s has no file %.80q", sk.manifest.GetName(), in.Resource),
		Suggestion:  "load the skill without `resource` for the list of its files",
		SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
}

// URI is the resource URI of a skill's file.
func URI(skill, path string) string { return URIScheme + skill + "/" + path }

// resourceList is the text listing the skill's files after its
// instructions.
func (s *Skill) resourceList() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Skill %s, version %s. ", s.manifest.GetName(), s.manifest.GetVersion())
	files := s.manifest.GetFiles()[1:]
	if len(files) == 0 {
		b.WriteString("It has no other files.")
		return b.String()
	}
	fmt.Fprintf(&b, "Its files (load one with {\"name\": %q, \"resource\": PATH}):\n", s.manifest.GetName())
	for _, f := range files {
		fmt.Fprintf(&b, "- %s (%s, %d bytes)\n", f.GetPath(), f.GetMimeType(), f.GetSize())
	}
	return b.String()
}

// resource is the content block of file f: an embedded resource
// (skill://<name>/<path>), text when the file is text, else a blob.
func (s *Skill) resource(f *toolwirev1.SkillFile) *toolwirev1.Content {
	b := s.files[f.GetPath()]
	r := &toolwirev1.EmbeddedResource{Uri: URI(s.manifest.GetName(), f.GetPath()), MimeType: f.GetMimeType()}
	if isText(f, b) {
		r.Contents = &toolwirev1.EmbeddedResource_Text{Text: string(b)}
	} else {
		r.Contents = &toolwirev1.EmbeddedResource_Blob{Blob: b}
	}
	return &toolwirev1.Content{Kind: &toolwirev1.Content_Resource{Resource: r}}
}
