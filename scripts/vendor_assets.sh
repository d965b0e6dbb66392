#!/usr/bin/env bash
# Vendor the browser assets the built book needs, so that it loads nothing from a CDN.
# MathJax, require.js and the Jupyter widgets HTML manager come from the npm registry at pinned
# versions and are unpacked into assets/vendor/ (copied into the built site by _config.yml).
set -euo pipefail
cd "$(dirname "$0")/.."

MATHJAX=mathjax@3.2.2
REQUIREJS=requirejs@2.3.7
HTML_MANAGER=@jupyter-widgets/html-manager@1.0.15
dest=assets/vendor
stamp="$dest/.versions"
want="$MATHJAX $REQUIREJS $HTML_MANAGER (patched for MathJax 3)"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "vendored assets are up to date ($want)"
  exit 0
fi
command -v npm >/dev/null || { echo "npm is needed to vendor MathJax and the widget manager: install Node.js (apt-get install npm)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$MATHJAX" "$REQUIREJS" "$HTML_MANAGER" >/dev/null 2>&1) \
  || { echo "npm pack failed: is the npm registry reachable?" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/mathjax" "$dest/requirejs" "$dest/html-manager"
tar xzf "$tmp"/mathjax-*.tgz -C "$tmp" && mv "$tmp/package/es5" "$dest/mathjax/es5" && rm -rf "$tmp/package"
tar xzf "$tmp"/requirejs-*.tgz -C "$tmp" && cp "$tmp/package/require.js" "$dest/requirejs/require.js" && rm -rf "$tmp/package"
tar xzf "$tmp"/jupyter-widgets-html-manager-*.tgz -C "$tmp"
cp "$tmp"/package/dist/embed-amd.js "$tmp"/package/dist/*.woff* "$tmp"/package/dist/*.ttf "$tmp"/package/dist/*.eot "$tmp"/package/dist/*.svg "$dest/html-manager/"
# The widget manager typesets labels with the MathJax 2 API (MathJax.Hub.Queue); the book
# loads MathJax 3, so point those calls at MathJax 3's typesetPromise.
sed -i 's/MathJax\.Hub\.Queue(\["Typeset",MathJax\.Hub,\([a-z]\)\])/(MathJax.typesetPromise\&\&MathJax.typesetPromise([\1]).catch(function(){}))/g' \
  "$dest/html-manager/embed-amd.js"
if grep -q "MathJax.Hub" "$dest/html-manager/embed-amd.js"; then
  echo "embed-amd.js still calls the MathJax 2 API: update the patch in $0" >&2; exit 1
fi
echo "$want" > "$stamp"
echo "vendored $want into $dest"
