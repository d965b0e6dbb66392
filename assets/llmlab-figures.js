/* Two small fixes for every page of the book.
 *
 * 1. A tap (or click) on a figure opens it at its full drawn size, in an overlay that scrolls both
 *    ways: the figures are drawn at 700-1,500 px and shown at the width of the text, which on a phone
 *    leaves their labels a few pixels tall. The overlay closes with its button or Escape; a click
 *    with a modifier key (or a middle click) still opens the image file in a new tab, since each
 *    figure is a link to its own file.
 * 2. The theme reads its colour mode from localStorage and logs "Got invalid theme mode" when none
 *    was stored yet (every first visit); an empty mode is set to "auto", the theme's own default.
 */
(function () {
  var modes = ["light", "dark", "auto"];
  if (modes.indexOf(document.documentElement.dataset.mode) < 0) document.documentElement.dataset.mode = "auto";

  function linkFigures() {
    var images = document.querySelectorAll("main img, article img");
    Array.prototype.forEach.call(images, function (img) {
      if (img.closest("a") || img.closest(".llmlab-view") || !img.src) return;
      var link = document.createElement("a");
      link.href = img.currentSrc || img.src;
      link.target = "_blank";
      link.rel = "noopener";
      link.className = "llmlab-figure-link";
      link.title = "Open the full-size figure";
      link.setAttribute("aria-label", "open the full-size figure" + (img.alt ? ": " + img.alt : ""));
      img.parentNode.insertBefore(link, img);
      link.appendChild(img);
      link.addEventListener("click", function (event) {
        if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        openZoom(link.href, img.alt);
      });
    });
  }

  function openZoom(src, alt) {
    var overlay = document.createElement("div");
    overlay.className = "llmlab-figure-zoom";
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-modal", "true");
    overlay.setAttribute("aria-label", "figure at full size" + (alt ? ": " + alt : ""));
    overlay.style.cssText = "position:fixed;inset:0;z-index:10000;overflow:auto;background:#fff;" +
      "-webkit-overflow-scrolling:touch;padding:3rem 0.5rem 0.5rem 0.5rem;box-sizing:border-box";
    var close = document.createElement("button");
    close.type = "button";
    close.className = "llmlab-figure-zoom-close";
    close.textContent = "\u00d7";
    close.setAttribute("aria-label", "close the figure");
    close.style.cssText = "position:fixed;top:0.4rem;right:0.6rem;z-index:10001;font-size:1.6rem;line-height:1;" +
      "padding:0.3rem 0.7rem;border:1px solid #888;border-radius:0.4rem;background:#fff;color:#222;cursor:pointer";
    var big = document.createElement("img");
    big.src = src;
    big.alt = alt || "";
    // its own drawn size, never shrunk to the screen: that is what makes the labels legible
    big.style.cssText = "display:block;max-width:none;height:auto;margin:0 auto";
    var before = document.activeElement;
    function shut() {
      document.removeEventListener("keydown", onKey);
      overlay.remove();
      document.documentElement.style.overflow = "";
      if (before && before.focus) before.focus();
    }
    function onKey(event) { if (event.key === "Escape") shut(); }
    close.addEventListener("click", shut);
    document.addEventListener("keydown", onKey);
    overlay.appendChild(close);
    overlay.appendChild(big);
    document.body.appendChild(overlay);
    document.documentElement.style.overflow = "hidden";
    close.focus();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", linkFigures);
  else linkFigures();
})();
