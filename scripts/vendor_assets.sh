#!/usr/bin/env bash
# Vendor the browser assets the built book needs, so that it loads nothing from a CDN.
# MathJax comes from the npm registry at a pinned version and is unpacked into assets/vendor/
# (copied into the built site by _config.yml; the build leaves out the bundles pages never load).
set -euo pipefail
cd "$(dirname "$0")/.."

MATHJAX=mathjax@3.2.2
dest=assets/vendor
stamp="$dest/.versions"
want="$MATHJAX"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "vendored assets are up to date ($want)"
  exit 0
fi
command -v npm >/dev/null || { echo "npm is needed to vendor MathJax: install Node.js (apt-get install npm)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$MATHJAX" >/dev/null 2>&1) \
  || { echo "npm pack failed: is the npm registry reachable?" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/mathjax"
tar xzf "$tmp"/mathjax-*.tgz -C "$tmp" && mv "$tmp/package/es5" "$dest/mathjax/es5" && rm -rf "$tmp/package"
echo "$want" > "$stamp"
echo "vendored $want into $dest"
