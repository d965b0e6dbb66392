/* Two small fixes for every page of the book.
 *
 * 1. A tap (or click) on a figure opens the full-size image: the figures are drawn at about 1,500 px
 *    and shown at the width of the text, which on a phone leaves their labels a few pixels tall.
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
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", linkFigures);
  else linkFigures();
})();
