package skills

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Load reads the skills in dirs: every directory directly in one of them
// that holds a SKILL.md is a skill (hidden entries and plain files are
// ignored). Everything is bounded before it is read (the limits of
// limits.go: entries, depth, sizes, front matter) and confined to its
// directory: files are opened through an os.Root, so a symlink that
// leads out of a configured directory, or out of its skill, is an error,
// as is a path element that CheckPath refuses, a device, socket or pipe,
// a skill whose name is not its directory's, and a name found twice.
// Errors name the directory and the file; one bad skill fails the load
// (a worker serves the skills configured, or none).
func Load(ctx context.Context, dirs []string) (*Set, error) {
	l := &loader{byName: map[string]string{}}
	for _, d := range dirs {
		if err := l.loadDir(ctx, d); err != nil {
			return nil, fmt.Errorf("skills: %s: %w", d, err)
		}
	}
	set := newSet(l.skills)
	if err := Check(set.Manifests()); err != nil {
		// Within the bounds above only the manifests' size can fail here:
		// the registry would refuse them, so the worker does not start.
		return nil, err
	}
	return set, nil
}

// loader is one Load: what is loaded so far, for the totals.
type loader struct {
	skills []*Skill
	// byName maps each skill's name to its directory.
	byName     map[string]string
	totalBytes int64
	totalFiles int
}

// loadDir loads the skills of one configured directory.
func (l *loader) loadDir(ctx context.Context, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	entries, err := readDir(root, ".", MaxDirEntries)
	if errors.Is(err, errTooMany) {
		return fmt.Errorf("more than %d entries", MaxDirEntries)
	} else if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		// Stat through the root: a symlink to a directory inside it is
		// followed, one leading out is an error.
		fi, err := root.Stat(e.Name())
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := l.loadSkill(root, filepath.Join(dir, e.Name()), e.Name()); err != nil {
			return fmt.Errorf("skill %s: %w", e.Name(), err)
		}
	}
	return nil
}

// errTooMany is readDir's answer for a directory with too many entries.
var errTooMany = errors.New("too many entries")

// openFlags open a skill's files and directories: never blocking, so
// that a pipe put in place of what was stat'ed is an error (it is not a
// regular file or directory), not a start that hangs in open(2).
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK

// readDir reads at most max entries of dir in root, sorted by name; a
// directory with more is errTooMany (it is never read whole).
func readDir(root *os.Root, dir string, max int) ([]fs.DirEntry, error) {
	f, err := root.OpenFile(dir, openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(max + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(entries) > max {
		return nil, errTooMany
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// loadSkill loads the skill in directory name of root (where is its
// path, for errors and the duplicate check).
func (l *loader) loadSkill(parent *os.Root, where, name string) error {
	if _, err := parent.Stat(path.Join(name, InstructionsFile)); errors.Is(err, fs.ErrNotExist) {
		return nil // not a skill: no SKILL.md
	}
	if err := CheckName(name); err != nil {
		return fmt.Errorf("directory name: %w", err)
	}
	if other, ok := l.byName[name]; ok {
		return fmt.Errorf("skill %s is in %s and in %s", name, other, where)
	}
	if len(l.skills) == MaxSkills {
		return fmt.Errorf("more than %d skills", MaxSkills)
	}
	root, err := parent.OpenRoot(name)
	if err != nil {
		return err
	}
	defer root.Close()
	w := &skillWalk{l: l, root: root, files: map[string][]byte{}}
	if err := w.walk(".", 0); err != nil {
		return err
	}
	sk, err := w.skill(name)
	if err != nil {
		return err
	}
	l.byName[name] = where
	l.skills = append(l.skills, sk)
	return nil
}

// skillWalk reads one skill's files.
type skillWalk struct {
	l       *loader
	root    *os.Root
	entries int
	bytes   int64
	files   map[string][]byte
	order   []string
}

// walk reads directory dir (depth below the skill's) and what it holds.
func (w *skillWalk) walk(dir string, depth int) error {
	entries, err := readDir(w.root, dir, MaxEntries-w.entries)
	if errors.Is(err, errTooMany) {
		return fmt.Errorf("more than %d files and directories", MaxEntries)
	} else if err != nil {
		return err
	}
	w.entries += len(entries)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // hidden: .git and editors' files are not resources
		}
		p := path.Join(dir, e.Name())
		if err := CheckPath(p); err != nil {
			return err
		}
		fi, err := w.root.Stat(p) // follows symlinks inside the skill only
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir() && depth+1 > MaxDepth:
			return fmt.Errorf("%s: more than %d directories deep", p, MaxDepth)
		case fi.IsDir():
			if err := w.walk(p, depth+1); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := w.read(p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a regular file or directory (%s)", p, fi.Mode().Type())
		}
	}
	return nil
}

// read reads file p within the bounds. What was opened is checked, not
// what walk stat'ed before: p is opened without blocking, and the open
// file's fstat must say it is a regular file and gives the size the
// bounds and the read keep to.
func (w *skillWalk) read(p string) error {
	f, err := w.root.OpenFile(p, openFlags, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	size := fi.Size()
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file (%s)", p, fi.Mode().Type())
	case size > MaxFileBytes:
		return fmt.Errorf("%s: %d bytes, more than %d", p, size, MaxFileBytes)
	case w.bytes+size > MaxSkillBytes:
		return fmt.Errorf("%s: the skill's files are more than %d bytes", p, MaxSkillBytes)
	case w.l.totalBytes+size > MaxTotalBytes:
		return fmt.Errorf("%s: the skills are more than %d bytes", p, MaxTotalBytes)
	case w.l.totalFiles+1 > MaxTotalFiles:
		return fmt.Errorf("%s: the skills have more than %d files", p, MaxTotalFiles)
	}
	// Read no more than fstat said: a file growing meanwhile is an error,
	// never a larger read.
	b, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if int64(len(b)) != size {
		return fmt.Errorf("%s: changed while it was read", p)
	}
	w.bytes += size
	w.l.totalBytes += size
	w.l.totalFiles++
	w.files[p] = b
	w.order = append(w.order, p)
	return nil
}

// skill builds the skill from the files read: SKILL.md's front matter
// (its name must be the directory's) and the manifest.
func (w *skillWalk) skill(name string) (*Skill, error) {
	b, ok := w.files[InstructionsFile]
	if !ok {
		return nil, fmt.Errorf("%s is not a regular file", InstructionsFile)
	}
	fm, body, err := parseSkillFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", InstructionsFile, err)
	}
	if fm.name != name {
		return nil, fmt.Errorf("%s: name %.80q is not the directory's name %s", InstructionsFile, fm.name, name)
	}
	if err := CheckDescription(fm.description); err != nil {
		return nil, fmt.Errorf("%s: %w", InstructionsFile, err)
	}
	files := []*toolwirev1.SkillFile{fileEntry(InstructionsFile, b)}
	rest := slices.DeleteFunc(slices.Clone(w.order), func(p string) bool { return p == InstructionsFile })
	slices.Sort(rest)
	for _, p := range rest {
		files = append(files, fileEntry(p, w.files[p]))
	}
	m := &toolwirev1.Skill{Name: name, Description: fm.description, Files: files, Version: Version(files)}
	return &Skill{manifest: m, instructions: body, files: w.files}, nil
}
