#!/bin/sh
# describe.sh prints the version of the tree in the current directory (the
# repository's root), in the form of `git describe --tags --dirty`, from
# the file VERSION and the history, so that a clone without tags builds as
# what it is:
#
#   vX.Y.Z              the commit that last changed VERSION: the release
#   vX.Y.Z-N-gHASH      N commits after it (HASH: 12 hex digits of HEAD)
#   ...-dirty           with uncommitted changes to tracked files
#
# A shallow clone cannot count: unless its HEAD carries the tag vX.Y.Z it
# says vX.Y.Z-0-gHASH. Without git it says vX.Y.Z.
#
# `describe.sh check` fails when a tag v* at HEAD is not vX.Y.Z of VERSION,
# or when HEAD is tagged but not the commit that last changed VERSION: the
# release procedure (docs/development.md) runs it before `make dist`.
set -eu

release=$(cat VERSION 2>/dev/null) || { echo "describe.sh: no file VERSION in $(pwd)" >&2; exit 1; }
if ! printf '%s\n' "$release" | grep -Eqx '[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?'; then
	echo "describe.sh: VERSION holds \"$release\": want X.Y.Z or X.Y.Z-PRE, such as 0.2.0 or 0.2.0-rc1" >&2
	exit 1
fi
if ! git rev-parse --verify -q HEAD >/dev/null 2>&1; then
	[ "${1:-}" = check ] && { echo "describe.sh check: not a git checkout" >&2; exit 1; }
	echo "v$release"
	exit 0
fi

base=$(git log -1 --format=%H -- VERSION)
head=$(git rev-parse HEAD)
tagged=$(git tag --points-at HEAD --list 'v[0-9]*')

if [ "${1:-}" = check ]; then
	for t in $tagged; do
		if [ "$t" != "v$release" ]; then
			echo "describe.sh check: HEAD is tagged $t but VERSION says $release" >&2
			exit 1
		fi
		if [ "$base" != "$head" ]; then
			echo "describe.sh check: HEAD is tagged $t but is not the commit that sets VERSION to $release ($base)" >&2
			exit 1
		fi
	done
	exit 0
fi

dirty=
git diff --quiet HEAD -- 2>/dev/null || dirty=-dirty
if [ -z "$base" ]; then
	ahead=$(git rev-list --count HEAD) # VERSION is not committed yet
else
	ahead=$(git rev-list --count "$base..HEAD")
fi
short=$(git rev-parse --short=12 HEAD)
if printf '%s\n' "$tagged" | grep -qx "v$release"; then
	ahead=0
elif [ "$(git rev-parse --is-shallow-repository)" = true ]; then
	# The count is of the commits fetched: never say that this is the
	# release.
	echo "v$release-$ahead-g$short$dirty"
	exit 0
fi
if [ "$ahead" = 0 ]; then
	echo "v$release$dirty"
else
	echo "v$release-$ahead-g$short$dirty"
fi
