// The widget manager (vendor/html-manager/embed-amd.js) loads its icon fonts from a public path that
// defaults to the page's own folder, where they do not exist. Point it at the vendored copy.
window.__jupyter_widgets_assets_path__ = new URL("vendor/html-manager/", document.currentScript.src).href;
