#!/usr/bin/env bash
# Runs `buf breaking` (rules: FILE, from buf.yaml) on the working tree's
# contract against the contract this change started from.
#
# The baseline, unless BREAKING_AGAINST names a git revision (or `none`):
#   - on a branch that has diverged from main (local `main`, else
#     `origin/main`): the merge base, so a pull request is checked as a
#     whole;
#   - otherwise (on main itself, or no main ref): HEAD~1, so the last
#     commit and any uncommitted change are checked;
#   - with no parent (a single-commit or depth-1 clone): HEAD, which still
#     catches uncommitted changes.
# The baseline is exported with `git archive` rather than buf's `.git#branch=`
# input, which needs a local `main` branch and fails on detached or
# single-branch CI checkouts.
set -euo pipefail

BUF=${BUF:-go tool -modfile=tools/go.mod buf}
against=${BREAKING_AGAINST:-}
cd "$(git rev-parse --show-toplevel)"

if [[ $against == none ]]; then
	echo "buf breaking: skipped (BREAKING_AGAINST=none)"
	exit 0
fi

why="BREAKING_AGAINST"
if [[ -z $against ]]; then
	head=$(git rev-parse HEAD)
	main=""
	for ref in refs/heads/main refs/remotes/origin/main; do
		if git rev-parse -q --verify "$ref^{commit}" >/dev/null; then
			main=$ref
			break
		fi
	done
	base=""
	if [[ -n $main ]]; then
		base=$(git merge-base HEAD "$main" 2>/dev/null || true)
	fi
	if [[ -n $base && $base != "$head" ]]; then
		against=$base why="merge base with ${main#refs/*/}"
	elif git rev-parse -q --verify 'HEAD~1^{commit}' >/dev/null; then
		against=$(git rev-parse 'HEAD~1') why="parent of HEAD"
	else
		against=$head why="HEAD, no earlier commit available"
	fi
fi

sha=$(git rev-parse --verify "$against^{commit}")
if ! git cat-file -e "$sha:proto" 2>/dev/null; then
	echo "buf breaking: $against has no proto/ directory; nothing to compare"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
paths=(proto)
for f in buf.yaml buf.lock; do
	if git cat-file -e "$sha:$f" 2>/dev/null; then paths+=("$f"); fi
done
git archive "$sha" -- "${paths[@]}" | tar -x -C "$tmp"

echo "buf breaking against ${sha:0:12} ($why)"
$BUF breaking --against "$tmp"
