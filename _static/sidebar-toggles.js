// The ☰ (primary sidebar) and "contents" (secondary sidebar) buttons.
// pydata-sphinx-theme 0.17 adds its own toggle buttons to the top bar, so every page has two elements
// with class .primary-toggle (and two .secondary-toggle); both themes bind their click handlers to the
// first one only (document.querySelector), and the buttons a reader actually sees stayed dead
// (pydata-sphinx-theme issue #2451). Each other button now forwards its click to the first, which
// opens the drawer on a phone and collapses the sidebar on a desktop (sphinx-book-theme's handler).
document.addEventListener("DOMContentLoaded", () => {
  for (const kind of ["primary", "secondary"]) {
    const [first, ...others] = document.querySelectorAll(`.${kind}-toggle`);
    for (const button of others) {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        first.click();
      });
    }
  }
});
