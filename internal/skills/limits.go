package skills

// Bounds on what a worker loads and what the registry accepts. They are
// constants, not settings: the registry holds every dispatcher to the
// same ones (Check), so a worker can never announce more than a
// dispatcher accepts. The manifests together are at most
// MaxManifestBytes encoded, so the `skill` tool's spec (manifests and a
// description listing the skills) stays near 200 KB at most, every
// version of which the registry bucket keeps.
const (
	// MaxSkills is the number of skills one worker (one `skill` tool)
	// serves.
	MaxSkills = 64
	// MaxDirEntries is the number of entries a configured skills
	// directory may hold, hidden ones and files included: read with
	// this bound, never whole.
	MaxDirEntries = 256
	// MaxEntries is the number of entries (files and directories, hidden
	// ones included) one skill's directory tree may hold.
	MaxEntries = 64
	// MaxTotalFiles is the number of files (SKILL.md included) of all the
	// skills of one worker: the size of the manifest in the registry.
	MaxTotalFiles = 512
	// MaxManifestBytes is the size of all the skills' manifests, encoded
	// (ToolSpec.skills).
	MaxManifestBytes = 128 << 10
	// MaxDepth is how deep a resource may lie below its skill's directory.
	MaxDepth = 8
	// MaxPathBytes is the length of a resource's path in its skill.
	MaxPathBytes = 256
	// MaxFileBytes is the size of one file (SKILL.md or a resource).
	MaxFileBytes = 256 << 10
	// MaxSkillBytes is the size of one skill's files together.
	MaxSkillBytes = 1 << 20
	// MaxTotalBytes is the size of all the skills of one worker, held in
	// its memory.
	MaxTotalBytes = 16 << 20
	// MaxFrontMatterBytes is the size of SKILL.md's front matter.
	MaxFrontMatterBytes = 16 << 10
	// MaxNameLen is the length of a skill's name (the common format's).
	MaxNameLen = 64
	// MaxDescription is the length of a skill's description in
	// characters (the common format's).
	MaxDescription = 1024
)
