"""python -m llmlab.live FOLDER [NPM_DIST]: write the live model's site files (see llmlab.live.site)."""
import re
import sys
from pathlib import Path

from llmlab.live.site import inputs_digest, write_site

if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m llmlab.live FOLDER [NPM_DIST]  (NPM_DIST default: "
                 "web/node_modules/onnxruntime-web/dist)")
    folder = Path(sys.argv[1])
    npm = Path(sys.argv[2] if len(sys.argv) == 3 else "web/node_modules/onnxruntime-web/dist")
    manifest_js = folder / "manifest.js"
    text = manifest_js.read_text() if manifest_js.is_file() else ""
    complete = text and all((folder / name).is_file() for name in re.findall(r'"script": "([^"]+)"', text))
    if complete and inputs_digest(npm) in text:
        print(f"live model: {folder} is up to date")
        sys.exit(0)
    manifest = write_site(folder, npm)
    total = sum(f["script_bytes"] for f in manifest["files"])
    print(f"live model: wrote {len(manifest['files'])} files, {total / 1e6:.1f} MB, into {folder}")
