package skills

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// InstructionsFile is the file of a skill's directory that makes it one.
const InstructionsFile = "SKILL.md"

var (
	// nameRe is the common format's rule for a skill's name: lowercase
	// letters, digits and single hyphens, neither first nor last.
	nameRe = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	// segmentRe is what one element of a resource's path may be: no
	// leading dot (hidden files are not loaded; `.` and `..` never are).
	segmentRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
	hexRe     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// mimeRe is a media type without parameters: type/subtype, each a
	// restricted name of RFC 6838 (a letter or digit, then letters,
	// digits and !#$&-^_.+).
	mimeRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$`)
)

// CheckSpec checks what a spec says of skills, as the registry receives
// it from a worker, which it does not trust (registry.Check calls it for
// every spec): only the native tool ToolName carries skills; its
// manifests pass Check; and what models are shown of them is what was
// checked: the description is Describe of the manifests and there is no
// summary (which the exports and MCP would show instead). A spec without
// skills passes.
func CheckSpec(spec *toolwirev1.ToolSpec) error {
	ms := spec.GetSkills()
	if len(ms) == 0 {
		return nil
	}
	if spec.GetName() != ToolName || spec.GetExecutor() != toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE {
		return fmt.Errorf("skills: only the native tool %q carries skills, not %s tool %.80q", ToolName, spec.GetExecutor(), spec.GetName())
	}
	errs := []error{Check(ms)}
	if spec.GetDescription() != Describe(ms) {
		errs = append(errs, errors.New("skills: the description is not the listing of the skills (skills.Describe)"))
	}
	if spec.GetSummary() != "" {
		errs = append(errs, errors.New("skills: the skill tool has no summary (its description lists the skills)"))
	}
	return errors.Join(errs...)
}

// CheckName reports whether name is a skill's name: at most MaxNameLen
// characters of the common format's rule.
func CheckName(name string) error {
	if len(name) > MaxNameLen || !nameRe.MatchString(name) {
		return fmt.Errorf("skill name %.80q: want at most %d lowercase letters, digits and single hyphens, neither first nor last", name, MaxNameLen)
	}
	return nil
}

// CheckPath reports whether p is a path a skill's file may have:
// `/`-separated elements of letters, digits, `.`, `_` and `-`, none
// starting with a dot (so never `.` or `..`), at most MaxPathBytes long
// and MaxDepth directories deep.
func CheckPath(p string) error {
	if p == "" || len(p) > MaxPathBytes {
		return fmt.Errorf("path %.80q: want 1 to %d bytes", p, MaxPathBytes)
	}
	parts := strings.Split(p, "/")
	if len(parts) > MaxDepth+1 {
		return fmt.Errorf("path %.80q: more than %d directories deep", p, MaxDepth)
	}
	for _, s := range parts {
		if !segmentRe.MatchString(s) {
			return fmt.Errorf("path %.80q: element %.80q must be letters, digits, '.', '_' and '-', not starting with a dot", p, s)
		}
	}
	return nil
}

// CheckDescription reports whether d is a skill's description: not
// blank, valid UTF-8 without control characters but newlines and tabs,
// at most MaxDescription characters.
func CheckDescription(d string) error {
	switch {
	case strings.TrimSpace(d) == "":
		return errors.New("description is empty")
	case !utf8.ValidString(d):
		return errors.New("description is not valid UTF-8")
	case utf8.RuneCountInString(d) > MaxDescription:
		return fmt.Errorf("description is longer than %d characters", MaxDescription)
	case strings.ContainsFunc(d, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }):
		return errors.New("description has control characters")
	}
	return nil
}

// Check validates a spec's skills as the registry receives them from a
// worker, which it does not trust: the bounds above, the rules of names,
// descriptions and paths, SKILL.md first, paths unique, digests and the
// version well-formed and the version the digest of the files. It returns
// every problem, joined.
func Check(skills []*toolwirev1.Skill) error {
	if len(skills) > MaxSkills {
		return fmt.Errorf("skills: %d skills, more than %d", len(skills), MaxSkills)
	}
	var errs []error
	names := map[string]bool{}
	files := 0
	for i, s := range skills {
		if err := checkSkill(s); err != nil {
			errs = append(errs, fmt.Errorf("skills[%d]: %w", i, err))
		}
		if names[s.GetName()] {
			errs = append(errs, fmt.Errorf("skills[%d]: skill %.80q listed twice", i, s.GetName()))
		}
		names[s.GetName()] = true
		files += len(s.GetFiles())
	}
	if files > MaxTotalFiles {
		errs = append(errs, fmt.Errorf("skills: %d files, more than %d", files, MaxTotalFiles))
	}
	if n := manifestBytes(skills); n > MaxManifestBytes {
		errs = append(errs, fmt.Errorf("skills: the manifests are %d bytes, more than %d", n, MaxManifestBytes))
	}
	return errors.Join(errs...)
}

// manifestBytes is the encoded size of the manifests.
func manifestBytes(skills []*toolwirev1.Skill) int {
	n := 0
	for _, s := range skills {
		n += proto.Size(s)
	}
	return n
}

// checkSkill checks one skill of a manifest.
func checkSkill(s *toolwirev1.Skill) error {
	if err := CheckName(s.GetName()); err != nil {
		return err
	}
	if err := CheckDescription(s.GetDescription()); err != nil {
		return fmt.Errorf("skill %s: %w", s.GetName(), err)
	}
	if err := CheckFrontMatter(s.GetFrontmatter(), s.GetName(), s.GetDescription()); err != nil {
		return fmt.Errorf("skill %s: %w", s.GetName(), err)
	}
	fs := s.GetFiles()
	if len(fs) == 0 || len(fs) > MaxEntries || fs[0].GetPath() != InstructionsFile {
		return fmt.Errorf("skill %s: want %s first and at most %d files", s.GetName(), InstructionsFile, MaxEntries)
	}
	var total int64
	seen := map[string]bool{}
	for _, f := range fs {
		if err := CheckPath(f.GetPath()); err != nil {
			return fmt.Errorf("skill %s: %w", s.GetName(), err)
		}
		if seen[f.GetPath()] {
			return fmt.Errorf("skill %s: file %s listed twice", s.GetName(), f.GetPath())
		}
		seen[f.GetPath()] = true
		if f.GetSize() < 0 || f.GetSize() > MaxFileBytes || !hexRe.MatchString(f.GetSha256()) ||
			len(f.GetMimeType()) > 128 || !mimeRe.MatchString(f.GetMimeType()) {
			return fmt.Errorf("skill %s: file %s: want a size of 0 to %d bytes, a hex SHA-256 and a media type/subtype of at most 128 bytes (RFC 6838 names, no parameters)", s.GetName(), f.GetPath(), MaxFileBytes)
		}
		total += f.GetSize()
	}
	// A path is a file or a directory, never both (a file "a" and a file
	// "a/b"): a listing of the skill's directories could not say which.
	for _, f := range fs {
		for dir := path.Dir(f.GetPath()); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				return fmt.Errorf("skill %s: %s is a file and the directory of %s", s.GetName(), dir, f.GetPath())
			}
		}
	}
	if total > MaxSkillBytes {
		return fmt.Errorf("skill %s: %d bytes, more than %d", s.GetName(), total, MaxSkillBytes)
	}
	if s.GetVersion() != Version(fs) {
		return fmt.Errorf("skill %s: version %.80q is not the digest of its files", s.GetName(), s.GetVersion())
	}
	return nil
}
