#!/bin/sh
# check-go-sdk.sh: third_party/go-sdk must be upstream
# github.com/modelcontextprotocol/go-sdk at the version below plus exactly
# the patches in third_party/go-sdk/patches (described in PATCHES.md), so
# that the replace directive in go.mod cannot hide an undocumented edit.
# Run by `make test` (target check-forks); needs the Go module cache or the
# module proxy once.
#
# It rebuilds the expected tree (the upstream files the vendored copy keeps,
# from the module cache, which go verifies against go.sum) in a scratch
# directory, applies the patches in order with git apply (a patch that does
# not apply cleanly fails), and compares that with the vendored copy byte for
# byte (a file edited, added or left out without a patch fails).
set -eu
version=v1.8.0
module=github.com/modelcontextprotocol/go-sdk
here=$(cd "$(dirname "$0")" && pwd)
vendored=$here/go-sdk
GO=${GO:-go}

if ! grep -q "^	$module $version\$" "$here/../go.mod"; then
	echo "check-go-sdk: go.mod does not require $module $version; update this check with the vendored copy" >&2
	exit 1
fi
dir=$($GO mod download -json "$module@$version" | sed -n 's/^	"Dir": "\(.*\)",$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
	echo "check-go-sdk: go mod download $module@$version gave no directory" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The upstream files the vendored copy keeps. A vendored file with no
# upstream original must come from a patch; if none creates it, the
# comparison below names it.
(cd "$vendored" && find . -type f ! -name PATCHES.md ! -path './patches/*') | while read -r f; do
	if [ -f "$dir/$f" ]; then
		mkdir -p "$tmp/$(dirname "$f")"
		cp "$dir/$f" "$tmp/$f"
	fi
done
chmod -R u+w "$tmp"
for p in "$vendored"/patches/*.patch; do
	# The ceiling keeps git from finding a repository above the scratch
	# directory: inside one, git apply skips paths outside the current
	# directory without an error.
	if ! (cd "$tmp" && GIT_CEILING_DIRECTORIES=$(dirname "$tmp") git apply --whitespace=nowarn "$p"); then
		echo "check-go-sdk: $(basename "$p") does not apply to $module $version" >&2
		exit 1
	fi
done
if ! (cd "$tmp" && diff -r -x PATCHES.md -x patches . "$vendored") >"$tmp.diff" 2>&1; then
	echo "check-go-sdk: third_party/go-sdk is not $module $version plus third_party/go-sdk/patches:" >&2
	head -40 "$tmp.diff" >&2
	rm -f "$tmp.diff"
	exit 1
fi
rm -f "$tmp.diff"
echo "third_party/go-sdk = $module $version + $(ls "$vendored"/patches/*.patch | wc -l) patches"
