#!/usr/bin/env bash
# Releases every library module of the repository together, at one version,
# from one commit:
#
#   scripts/release.sh VERSION        # check, date CHANGELOG.md, commit, tag
#   scripts/release.sh -n VERSION     # dry run: check and show, change nothing (CI)
#   scripts/release.sh -list          # the directories of the modules it tags
#
# It tags vX.Y.Z for the root module and DIR/vX.Y.Z for each nested library
# (redisstore/, otelbw/): the tags a module proxy resolves. bench/, e2e/ and
# otelbw/example are programs and tests, never imported, so they get none.
#
# Before changing anything it checks that the tree is clean, that no tag
# exists yet, that every module's requirements on the repository's modules
# name VERSION (each nested module requires the others at the version being
# released and replaces them with their directory for local builds:
# internal/tools/modproxy -check), that CHANGELOG.md has an Unreleased
# section with something in it, and that a consumer with no replace builds
# and runs against a module proxy holding the modules at VERSION
# (scripts/consumer.sh). Then it renames CHANGELOG.md's Unreleased section
# to "VERSION (date)" under a fresh, empty Unreleased, commits that, and
# creates annotated tags on the commit. It pushes nothing: it prints the
# push command. RELEASE_DATE (YYYY-MM-DD, default today in UTC) sets the
# date; a dry run prints the CHANGELOG.md it would write as a diff and
# reports an unclean tree without stopping.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The library modules, by directory; the root first.
libraries=(. redisstore otelbw)

usage() { sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

dry=
case ${1:-} in
  -list) printf '%s\n' "${libraries[@]}"; exit 0 ;;
  -n|-dry-run|--dry-run) dry=1; shift ;;
  -h|--help|"") usage ;;
esac
[ $# -eq 1 ] || usage
version=$1

fail() { echo "release: $*" >&2; exit 1; }
say() { if [ -n "$dry" ]; then echo "release (dry run): $*"; else echo "release: $*"; fi; }

# Semantic versions without a major version suffix: the modules' paths
# have none, so v2 and later would need new paths.
[[ $version =~ ^v(0|1)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] ||
  fail "$version: want vMAJOR.MINOR.PATCH with MAJOR 0 or 1, such as v0.2.0"

tags=()
for dir in "${libraries[@]}"; do
  if [ "$dir" = . ]; then tags+=("$version"); else tags+=("$dir/$version"); fi
done

if [ -n "$(git status --porcelain)" ]; then
  [ -n "$dry" ] || fail "the tree has uncommitted or untracked files: commit or remove them first"
  say "the tree has uncommitted or untracked files: a release would stop here"
fi
for tag in "${tags[@]}"; do
  if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
    fail "the tag $tag exists already"
  fi
done

say "requirements between the modules"
go run ./internal/tools/modproxy -version "$version" -check "${libraries[@]}" | sed 's/^/  /' ||
  fail "the modules' requirements do not match $version (go mod edit -require=MODULE@$version in each)"

# CHANGELOG.md: the Unreleased section has entries and the version has no
# section yet.
grep -qx '## Unreleased' CHANGELOG.md || fail "CHANGELOG.md has no '## Unreleased' section"
grep -q "^## $version\( \|\$\)" CHANGELOG.md && fail "CHANGELOG.md has a section for $version already"
entries=$(awk '$0 == "## Unreleased" {on = 1; next} on && /^## / {exit} on && NF {n++} END {print n + 0}' CHANGELOG.md)
[ "$entries" -gt 0 ] || fail "CHANGELOG.md's Unreleased section is empty"

date=${RELEASE_DATE:-$(date -u +%Y-%m-%d)}
[[ $date =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || fail "RELEASE_DATE $date: want YYYY-MM-DD"
tagline="Tags: $(printf '`%s`, ' "${tags[@]}" | sed 's/, $//')."
changelog=$(mktemp)
trap 'rm -f "$changelog"' EXIT
awk -v v="$version" -v d="$date" -v tags="$tagline" '
  !done && $0 == "## Unreleased" { print; print ""; print "## " v " (" d ")"; print ""; print tags; done = 1; next }
  { print }' CHANGELOG.md > "$changelog"

if [ -n "$dry" ]; then
  say "CHANGELOG.md would become:"
  diff -u --label CHANGELOG.md --label "CHANGELOG.md at $version" CHANGELOG.md "$changelog" | sed 's/^/  /' || true
  say "would run scripts/consumer.sh $version (CI runs it on its own), commit 'release: $version' and tag ${tags[*]}"
  exit 0
fi

say "a consumer with no replace, against a module proxy holding the modules at $version"
scripts/consumer.sh "$version"

cp "$changelog" CHANGELOG.md
git add CHANGELOG.md
git commit -q -m "release: $version"
for tag in "${tags[@]}"; do
  git tag -a "$tag" -m "breakwater $tag"
done
say "tagged $(git rev-parse --short HEAD) as ${tags[*]}"
echo "push with: git push origin HEAD ${tags[*]}"
