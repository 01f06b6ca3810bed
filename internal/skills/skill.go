package skills

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// Set is the skills a worker loaded: each skill's manifest (what the
// registry holds) and its files' content (what the `skill` tool
// returns), held in memory from the load on, so that what a call returns
// is what the manifest's digests describe whatever happens on disk
// later. A Set is immutable and safe for concurrent use.
type Set struct {
	// skills in name order.
	skills []*Skill
	byName map[string]*Skill
}

// Skill is one loaded skill.
type Skill struct {
	manifest     *toolwirev1.Skill
	instructions string
	files        map[string][]byte
}

// Manifest returns a copy of the skill's manifest.
func (s *Skill) Manifest() *toolwirev1.Skill { return proto.CloneOf(s.manifest) }

// Instructions returns the Markdown after SKILL.md's front matter.
func (s *Skill) Instructions() string { return s.instructions }

// Manifests returns a copy of every skill's manifest, in name order.
func (s *Set) Manifests() []*toolwirev1.Skill {
	out := make([]*toolwirev1.Skill, 0, len(s.skills))
	for _, sk := range s.skills {
		out = append(out, sk.Manifest())
	}
	return out
}

// Get returns the skill name, if the set has it.
func (s *Set) Get(name string) (*Skill, bool) {
	sk, ok := s.byName[name]
	return sk, ok
}

// Len is the number of skills.
func (s *Set) Len() int { return len(s.skills) }

// newSet builds a Set of skills (names unique, checked by the loader).
func newSet(skills []*Skill) *Set {
	slices.SortFunc(skills, func(a, b *Skill) int { return strings.Compare(a.manifest.GetName(), b.manifest.GetName()) })
	s := &Set{skills: skills, byName: make(map[string]*Skill, len(skills))}
	for _, sk := range skills {
		s.byName[sk.manifest.GetName()] = sk
	}
	return s
}

// Version is the digest of a skill's files in their order: the hex
// SHA-256 of each file's path, a NUL, its hex digest and a newline.
func Version(files []*toolwirev1.SkillFile) string {
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f.GetPath()))
		h.Write([]byte{0})
		h.Write([]byte(f.GetSha256()))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fileEntry returns the manifest entry of a file with content b.
func fileEntry(p string, b []byte) *toolwirev1.SkillFile {
	sum := sha256.Sum256(b)
	return &toolwirev1.SkillFile{Path: p, Size: int64(len(b)), Sha256: hex.EncodeToString(sum[:]), MimeType: mimeType(p, b)}
}

// mimeTypes are the media types known by extension: a fixed table, not
// the host's (mime.TypeByExtension reads /etc/mime.types), so that the
// manifest, and the spec's version, do not depend on the host.
var mimeTypes = map[string]string{
	".md": "text/markdown", ".txt": "text/plain", ".py": "text/x-python", ".sh": "text/x-shellscript",
	".js": "text/javascript", ".ts": "text/x-typescript", ".go": "text/x-go", ".json": "application/json",
	".yaml": "application/yaml", ".yml": "application/yaml", ".toml": "application/toml", ".csv": "text/csv",
	".html": "text/html", ".xml": "application/xml", ".svg": "image/svg+xml", ".png": "image/png",
	".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".pdf": "application/pdf",
}

// mimeType is a file's media type: by its extension, else text/plain for
// valid UTF-8 and application/octet-stream for the rest.
func mimeType(p string, b []byte) string {
	if t, ok := mimeTypes[strings.ToLower(path.Ext(p))]; ok {
		return t
	}
	if utf8.Valid(b) {
		return "text/plain"
	}
	return "application/octet-stream"
}

// isText reports whether a file is returned as text (else as a blob).
func isText(f *toolwirev1.SkillFile, b []byte) bool {
	t := f.GetMimeType()
	textual := strings.HasPrefix(t, "text/") || t == "application/json" || t == "application/yaml" ||
		t == "application/toml" || t == "application/xml" || t == "image/svg+xml"
	return textual && utf8.Valid(b)
}
