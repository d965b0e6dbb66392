/* The sidebar buttons a reader sees work on every width.
 *
 * pydata-sphinx-theme 0.17 (and sphinx-book-theme 1.3 on top of it) attach the sidebar handlers to
 * the FIRST .primary-toggle and .secondary-toggle of the page only: the site header's, which the book
 * theme hides. The buttons shown in the article header (the chapter list and "Contents") therefore
 * did nothing, on a phone or at 1280 px. Here a click on any other toggle is passed on to that first
 * button, so the themes' own code runs: at 992 px and wider the chapter list collapses and comes
 * back; narrower, the chapter list or the contents open as a panel (closed by Escape or a tap outside).
 */
(function () {
  function forwardToggles() {
    ["primary-toggle", "secondary-toggle"].forEach(function (name) {
      var buttons = document.querySelectorAll("button." + name);
      var bound = buttons[0];
      for (var i = 1; i < buttons.length; i++) {
        buttons[i].addEventListener("click", function (event) {
          event.preventDefault();
          event.stopPropagation();
          bound.click();
        });
      }
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", forwardToggles);
  } else {
    forwardToggles();
  }
})();
