#!/usr/bin/env bash
# Proves that `make verify` guards the contract, in a throw-away copy of
# the working tree committed as a fresh repository on branch main:
#
#   1. a field added to a .proto without regenerating → verify fails,
#      and says the generated code is stale;
#   2. the same change regenerated and committed → the generated-code and
#      breaking checks pass (an added field is compatible);
#   3. that field renamed, regenerated and committed → verify fails in
#      buf breaking;
#   4. a field the TypeScript SDK's hand-written layer uses renamed
#      (CallRequest.arguments_json) → verify fails in tsc.
#
# Checks 1-3 are about the Go side and the contract: they run with
# GENERATE_TS=0 (the Makefile's generate leaves the TypeScript SDK out), so
# only check 4 runs protoc-gen-es and tsc (about a minute under load).
#
# The copy takes tracked and untracked files (respecting .gitignore), so it
# tests the Makefile as it is now, not as last committed.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy=$tmp/repo
mkdir "$copy"
(
	cd "$root"
	git ls-files -z -co --exclude-standard |
		while IFS= read -r -d '' f; do if [[ -e $f ]]; then printf '%s\0' "$f"; fi; done |
		tar --null -T - -cf -
) | tar -xf - -C "$copy"

cd "$copy"
# The TypeScript SDK's dependencies (gitignored; make generate runs its
# protoc-gen-es and tsc; make verify-selftest installs them first) are
# linked from the tree, not installed again.
if [[ -d $root/sdk/typescript/node_modules ]]; then
	ln -s "$root/sdk/typescript/node_modules" sdk/typescript/node_modules
fi
export GENERATE_TS=0
git init -q -b main
git add -A
commit() { git -c user.name=verify-selftest -c user.email=selftest@invalid commit -qm "$1"; }
commit "baseline"

log=$tmp/make.log
# expect_fail TARGET PATTERN: make TARGET must fail and print PATTERN.
# -k runs every check, so PATTERN is found even when an unrelated one fails.
expect_fail() {
	if make -k --no-print-directory "$1" >"$log" 2>&1; then
		cat "$log"
		echo "verify-selftest: FAIL: make $1 passed, want a failure matching '$2'"
		exit 1
	fi
	if ! grep -q -- "$2" "$log"; then
		cat "$log"
		echo "verify-selftest: FAIL: make $1 failed, but not with '$2'"
		exit 1
	fi
}
expect_pass() {
	if ! make --no-print-directory "$@" >"$log" 2>&1; then
		cat "$log"
		echo "verify-selftest: FAIL: make $* failed"
		exit 1
	fi
}

proto=proto/toolwire/v1/call.proto
printf '\n// SelftestProbe exists only in verify-selftest.\nmessage SelftestProbe {\n  string note = 1;\n}\n' >>"$proto"

expect_fail verify "generated code is stale"
echo "verify-selftest: ok: a .proto change without regeneration fails make verify"

git checkout -q -- pkg/toolproto
expect_pass generate
git add -A
commit "add SelftestProbe"
expect_pass verify-proto-format verify-proto-lint verify-generated verify-breaking
echo "verify-selftest: ok: the regenerated, committed change passes"

sed -i 's/string note = 1;/string remark = 1;/' "$proto"
grep -q 'string remark = 1;' "$proto"
expect_pass generate
git add -A
commit "rename SelftestProbe.note"
expect_fail verify 'changed name from "note" to "remark"'
echo "verify-selftest: ok: a breaking change fails make verify"

git reset -q --hard HEAD~1 # back to the compatible SelftestProbe
sed -i 's/string arguments_json = 3;/string arguments_text = 3;/' proto/toolwire/v1/dispatcher.proto
grep -q 'string arguments_text = 3;' proto/toolwire/v1/dispatcher.proto
GENERATE_TS=1 expect_fail verify-generated "error TS.*argumentsJson"
echo "verify-selftest: ok: a proto change that breaks the TypeScript SDK fails make verify (in tsc)"
