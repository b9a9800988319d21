#!/usr/bin/env bash
# Rebuilds vendor/libssh2-sys from the crates.io package libssh2-sys $VERSION (its .crate
# checked against $SHA256), trimmed to what its build.rs reads, plus the patches in
# vendor/libssh2-sys.patches/ in name order. BATON-PATCH.md is baton's own and is kept.
#
#   vendor/regenerate-libssh2-sys.sh            rewrite vendor/libssh2-sys
#   vendor/regenerate-libssh2-sys.sh --check    exit 1 if vendor/libssh2-sys differs (CI)
#   vendor/regenerate-libssh2-sys.sh --reject   as the first, leaving *.rej for hunks
#                                               that no longer apply (a new release)
#   vendor/regenerate-libssh2-sys.sh --refresh  rewrite each patch from the files of
#                                               vendor/libssh2-sys that it touches
#
# The .crate comes from cargo's registry cache (no network then); when it is not there,
# cargo itself downloads it (`cargo fetch` of a throwaway package), which checks it
# against the registry index. How to move to a new release: BATON-PATCH.md.
set -euo pipefail

VERSION=0.3.4
SHA256=fce5a0b125f6aeac93b304b35f7f1e9f054aad29ddac57091928e41df3ccd233
# What build.rs reads, and the licences; the rest of the package (libssh2's tests, docs,
# CMake and autotools files, ports) is left out.
KEEP=(Cargo.toml LICENSE-APACHE LICENSE-MIT build.rs lib.rs
  libssh2/COPYING libssh2/libssh2.pc.in libssh2/include libssh2/src)
OURS=BATON-PATCH.md

root="$(cd "$(dirname "$0")/.." && pwd)"
vendor="$root/vendor/libssh2-sys"
patches="$root/vendor/libssh2-sys.patches"
me="vendor/regenerate-libssh2-sys.sh"
mode="${1:-write}"
case "$mode" in
write | --check | --reject | --refresh) ;;
*)
  echo "usage: $me [--check | --reject | --refresh]" >&2
  exit 2
  ;;
esac

tmp="$(mktemp -d "${TMPDIR:-/tmp}/libssh2-sys.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# git apply and git diff --no-index work on plain directories; the ceiling keeps them
# from taking a repository around $TMPDIR for theirs.
export GIT_CEILING_DIRECTORIES="$tmp"

die() {
  echo "libssh2-sys: $*" >&2
  exit 1
}

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# Sets $crate to a cached .crate with the right checksum; fails if there is none.
find_crate() {
  local f found=""
  for f in "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"libssh2-sys-$VERSION.crate"; do
    [ -f "$f" ] || continue
    found="$f"
    if [ "$(sha_of "$f")" = "$SHA256" ]; then
      crate="$f"
      return 0
    fi
  done
  [ -z "$found" ] || die "$found has sha256 $(sha_of "$found"), not $SHA256 (this script's SHA256): for a new release put that in SHA256; otherwise delete the file and run $me again"
  return 1
}

fetch_crate() {
  local proj="$tmp/fetch"
  mkdir -p "$proj/src"
  : >"$proj/src/lib.rs"
  cat >"$proj/Cargo.toml" <<EOF
[package]
name = "baton-fetch-libssh2-sys"
version = "0.0.0"
edition = "2021"

[dependencies]
libssh2-sys = "=$VERSION"

[workspace]
EOF
  # baton's lock, so that libssh2-sys's own dependencies resolve to the versions baton
  # builds (already downloaded, or needed by the build anyway).
  cp "$root/Cargo.lock" "$proj/Cargo.lock"
  echo "libssh2-sys: $VERSION is not in cargo's registry cache; cargo fetch" >&2
  "${CARGO:-cargo}" fetch --quiet --manifest-path "$proj/Cargo.toml" >&2
}

crate=""
find_crate || {
  fetch_crate || die "the .crate of $VERSION is not in cargo's registry cache and cargo could not download it: run $me once where cargo reaches crates.io"
  find_crate || die "cargo fetch did not leave libssh2-sys-$VERSION.crate in ${CARGO_HOME:-$HOME/.cargo}/registry/cache"
}

# The trimmed upstream tree into $1.
unpack() {
  mkdir -p "$1"
  tar -xzf "$crate" -C "$1" --strip-components=1 --no-same-owner --no-same-permissions \
    "${KEEP[@]/#/libssh2-sys-$VERSION/}"
}

if [ "$mode" = --refresh ]; then
  unpack "$tmp/a"
  cp -R "$vendor" "$tmp/b"
  rm -f "$tmp/b/$OURS"
  owned=()
  for p in "$patches"/*.patch; do
    mapfile -t files < <(sed -n 's|^+++ b/||p' "$p")
    out="$tmp/$(basename "$p")"
    : >"$out"
    for f in "${files[@]}"; do
      owned+=("$f")
      (cd "$tmp" && git diff --no-index --no-prefix "a/$f" "b/$f" >>"$out") || true
    done
    [ -s "$out" ] || die "$(basename "$p") no longer changes anything: delete it"
  done
  while read -r f; do
    [[ " ${owned[*]} " == *" $f "* ]] || die "$f differs from libssh2-sys $VERSION but no patch in vendor/libssh2-sys.patches/ touches it: put its diff into a patch (a new NNNN-what.patch, \`git diff --no-index --no-prefix a/$f b/$f\` with a/ upstream, b/ ours) and run $me --refresh again"
  done < <(cd "$tmp" && diff -rq a b | sed -n 's|^Files a/\(.*\) and b/.* differ$|\1|p; s|^Only in [ab]/\?\(.*\): \(.*\)$|\1/\2|p' | sed 's|^/||')
  for p in "$patches"/*.patch; do cp "$tmp/$(basename "$p")" "$p"; done
  echo "libssh2-sys: patches rewritten from vendor/libssh2-sys; now run $me --check"
  exit 0
fi

out="$tmp/libssh2-sys"
unpack "$out"
rejected=0
for p in "$patches"/*.patch; do
  if [ "$mode" = --reject ]; then
    git -C "$out" apply --reject "$p" || rejected=1
  else
    git -C "$out" apply "$p" ||
      die "$(basename "$p") does not apply to libssh2-sys $VERSION: run $me --reject, resolve the *.rej files in vendor/libssh2-sys by hand, delete them, then $me --refresh"
  fi
done

if [ "$mode" = --check ]; then
  if ! diff -r -x "$OURS" "$out" "$vendor" >"$tmp/diff"; then
    head -n 40 "$tmp/diff" >&2
    die "vendor/libssh2-sys is not libssh2-sys $VERSION plus vendor/libssh2-sys.patches/: put the change into a patch there ($me --refresh writes them from the tree), then run $me"
  fi
  echo "libssh2-sys: vendor/libssh2-sys is libssh2-sys $VERSION plus $(find "$patches" -name '*.patch' | wc -l) patches"
  exit 0
fi

[ ! -f "$vendor/$OURS" ] || cp "$vendor/$OURS" "$out/$OURS"
rm -rf "$vendor"
cp -R "$out" "$vendor"
if [ "$rejected" = 1 ]; then
  die "some hunks did not apply: resolve vendor/libssh2-sys/**/*.rej by hand, delete them, then run $me --refresh"
fi
echo "libssh2-sys: vendor/libssh2-sys rebuilt from libssh2-sys $VERSION plus vendor/libssh2-sys.patches/"
