// Readable search-result snippets. Sphinx's search page shows 240 characters of the found page's text,
// taken from its HTML: in this book that text would hold raw TeX (\(\sqrt{d_k}\)), code and printed
// output. This replaces Search.htmlToText (sphinx/themes/basic/static/searchtools.js, Sphinx 7.x) with one
// that drops code cells, outputs, display math and navigation, writes inline math as plain symbols and
// collapses whitespace. Loaded on every page (Jupyter Book adds _static/*.js); acts only where the search
// page's Search object exists.
(() => {
  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", theta: "θ", lambda: "λ",
    mu: "μ", pi: "π", sigma: "σ", tau: "τ", phi: "φ", omega: "ω", Delta: "Δ", Sigma: "Σ", Theta: "Θ",
    sqrt: "√", cdot: "·", times: "×", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠", to: "→",
    rightarrow: "→", infty: "∞", approx: "≈", sim: "~", in: "∈", sum: "Σ", prod: "Π", ldots: "…", dots: "…",
  };
  const DROP = [".headerlink", "script", "style", "div.cell_input", "div.cell_output", "pre",
    "div.math", ".math-wrapper", "mjx-container", "nav", ".prev-next-area", ".toggle-details__summary",
    "button", "summary", ".solution", ".dropdown"];

  const FORMAT = ["mathrm", "text", "mathbf", "operatorname", "left", "right", "big", "Big"];  // dropped
  const SPACED = ["frac", "top", "quad", "qquad"];  // a space
  // "\(\frac{QK^\top}{\sqrt{d_k}}\)" -> "QK^ √d_k", "\(d_{\text{head}}\)" -> "d_head": symbols kept, TeX
  // markup removed.
  const plainMath = (tex) => tex
    .replace(/^\\\(|\\\)$/g, "")
    .replace(/\\([A-Za-z]+)/g, (_, name) => SYMBOLS[name] ?? (FORMAT.includes(name) ? "" : SPACED.includes(name)
      ? " " : name))
    .replace(/[{}]/g, "")
    .replace(/\\[,;! ]/g, " ")
    .replace(/\s+/g, " ")
    .trim();

  const htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    for (const query of DROP) page.querySelectorAll(query).forEach((el) => el.remove());
    page.querySelectorAll("span.math").forEach((el) => { el.textContent = plainMath(el.textContent); });
    const main = page.querySelector('[role="main"]');
    const block = (anchor && main && main.querySelector(anchor)) || main;
    return block ? block.textContent.replace(/\s+/g, " ").trim() : "";
  };

  document.addEventListener("DOMContentLoaded", () => {
    if (typeof Search !== "undefined") Search.htmlToText = htmlToText;
  });
})();
