"""The shipped poet in the reader's browser (web/poet/): its weights for the page, and the page's sampler in Python.

    python tools/poet_web.py export OUT_DIR          # OUT_DIR/poet.json and OUT_DIR/poet-<sha>.bin
    python tools/poet_web.py write 春夏秋冬 --form 五绝 --seed 1   # the poem the page writes with these settings
    python tools/poet_web.py measure _build/html     # sizes and timings in Chromium -> web/poet/measurements.md

The build writes the export into ``_build/html/poet/`` (``tools/sphinx_course.py``), beside the widget's own
files (``web/poet/``, copied by ``html_extra_path``); the page fetches them only when the reader asks for a poem.

The binary holds ``data/poet.pt``'s tensors as stored there, little-endian, each at a multiple of 4 bytes: a
matrix as its int8 values (row-major), then one float32 scale per row; a vector in float32. The output layer is
tied to the token embedding, so it is not stored. ``poet.json`` gives the configuration, the vocabulary, each
tensor's offsets and shape, the SHA-256 of ``poet.pt`` and of the binary, and the verse tables of
``poetics.VerseRules`` (which tokens are Han characters, each one's rhyme class, which may open the rhyme).

The page samples with ``Mulberry32`` (a 32-bit integer generator, the same in JavaScript), then ``sample``:
temperature, top-k and an inverse-CDF draw in float64. ``write`` here is that sampler on the package's model in
float64, under the package's ``VerseRules``: the page's poem for the same settings, token for token.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import torch

from transformer_course import poet_full
from transformer_course.kv_cache import KVCache
from transformer_course.poetics import VerseRules
from transformer_course.utils import cpu_name

from common import ROOT, webdriver

WEB = ROOT / "web" / "poet"
MANIFEST = "poet.json"
_M32 = 0xFFFFFFFF


def _verse_tables(vocab) -> dict[str, str]:
    """Per token, one character each: Han or not, rhyme class (a letter, ``-`` none), may open the rhyme
    of a 绝句 (4 clauses) or of a 律诗 (8): what ``VerseRules`` decides from the sound tables."""
    quatrain, regulated = VerseRules(vocab, "五绝"), VerseRules(vocab, "五律")
    classes = sorted(set(quatrain.rhyme_of) - {None})
    letter = {c: chr(ord("a") + i) for i, c in enumerate(classes)}
    return {"han": "".join("01"[b] for b in quatrain.han.tolist()),
            "rhyme": "".join(letter.get(r, "-") for r in quatrain.rhyme_of),
            "opens4": "".join("01"[b] for b in quatrain.opens.tolist()),
            "opens8": "".join("01"[b] for b in regulated.opens.tolist())}


def export(out_dir: str | Path) -> dict:
    """Write ``poet.json`` and the binary it names into ``out_dir`` from the shipped ``data/poet.pt``; return
    the manifest (``bytes``: the binary's size)."""
    saved = poet_full._read(None)  # checks poet_full.SHIPPED_SHA256
    _, vocab = poet_full.load_shipped()
    chunks, tensors, offset = [], [], 0

    def put(array: np.ndarray) -> int:
        nonlocal offset
        start, data = offset, array.tobytes()
        chunks.append(data + b"\0" * (-len(data) % 4))
        offset += len(chunks[-1])
        return start

    for name, value in saved["state"].items():
        if "q" in value:  # (rows, cols) int8, then (rows,) float32
            q = value["q"].numpy()
            tensors.append({"name": name, "shape": list(q.shape), "q": put(q.astype(np.int8)),
                            "scale": put(value["scale"].numpy().reshape(-1).astype("<f4"))})
        else:
            tensors.append({"name": name, "shape": list(value["w"].shape), "w": put(value["w"].numpy().astype("<f4"))})
    blob = b"".join(chunks)
    sha = hashlib.sha256(blob).hexdigest()
    manifest = {"format": "transformer_course poet for the web v1", "source_sha256": poet_full.SHIPPED_SHA256,
                "bin": f"poet-{sha[:12]}.bin", "bin_sha256": sha, "bytes": len(blob), "config": saved["config"],
                "form_tokens": poet_full.FORM_TOKENS, "itos": vocab.itos, "verse": _verse_tables(vocab),
                "tensors": tensors}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("poet-*.bin"):
        old.unlink()
    (out / manifest["bin"]).write_bytes(blob)
    (out / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return manifest


def dequantised(out_dir: str | Path) -> dict[str, torch.Tensor]:
    """The exported tensors read back as the page reads them: ``q * scale`` in float32 (``load_shipped``'s rule)."""
    manifest = json.loads((Path(out_dir) / MANIFEST).read_text(encoding="utf-8"))
    blob = (Path(out_dir) / manifest["bin"]).read_bytes()
    state = {}
    for t in manifest["tensors"]:
        n = math.prod(t["shape"])
        if "q" in t:
            q = torch.from_numpy(np.frombuffer(blob, np.int8, n, t["q"]).reshape(t["shape"]).copy())
            scale = torch.from_numpy(np.frombuffer(blob, "<f4", t["shape"][0], t["scale"]).copy())
            state[t["name"]] = q.float() * scale[:, None]
        else:
            state[t["name"]] = torch.from_numpy(np.frombuffer(blob, "<f4", n, t["w"]).reshape(t["shape"]).copy())
    return state


class Mulberry32:
    """A 32-bit integer random generator (Tommy Ettinger's mulberry32); ``gen()`` is a float in [0, 1) with 32
    random bits. web/poet/generate.js has the same one, so both draw the same numbers from one seed."""

    def __init__(self, seed: int) -> None:
        self.state = seed & _M32

    def __call__(self) -> float:
        self.state = (self.state + 0x6D2B79F5) & _M32
        t = self.state
        t = ((t ^ (t >> 15)) * (t | 1)) & _M32
        t = ((t + (((t ^ (t >> 7)) * (t | 61)) & _M32)) & _M32) ^ t
        return ((t ^ (t >> 14)) & _M32) / 2**32


def sample(logits: list[float], allowed: list[bool], temperature: float, top_k: int, u: float
           ) -> tuple[int, float, float]:
    """One token from float64 ``logits`` (V,), among the ``allowed`` ones: the ``top_k`` largest (0: all; ties to
    the smaller id), weights ``exp((l - l_max) / temperature)``, the first whose running sum exceeds
    ``u * total``; ``temperature == 0``: the largest. Also returns how far the draw was from changing: the logit
    gap at the top-k cut and the distance of ``u * total`` from the nearest boundary, as a share of ``total``."""
    order = sorted((i for i, ok in enumerate(allowed) if ok), key=lambda i: (-logits[i], i))
    k = len(order) if top_k <= 0 or temperature == 0 else min(top_k, len(order))
    gap = logits[order[k - 1]] - logits[order[k]] if k < len(order) else math.inf
    if temperature == 0:
        return order[0], logits[order[0]] - logits[order[1]] if len(order) > 1 else math.inf, math.inf
    weights = [math.exp((logits[i] - logits[order[0]]) / temperature) for i in order[:k]]
    total = sum(weights)  # left to right, as the page sums
    target, before = u * total, 0.0
    for i, w in zip(order, weights):
        if target < before + w:
            return i, gap, min(target - before, before + w - target) / total
        before += w
    raise AssertionError("u must be in [0, 1)")


@functools.lru_cache(maxsize=1)
def reference_model():
    """The shipped poet in float64 (the float32 weights ``load_shipped`` gives, widened exactly), and its vocabulary."""
    model, vocab = poet_full.load_shipped()
    return model.double(), vocab


@torch.no_grad()
def write(form: str, *, prompt: str = "", acrostic: str = "", rules: bool = True, temperature: float = 0.8,
          top_k: int = 20, seed: int = 0) -> dict:
    """What the page writes: ``poet_full.write``'s start (form token, then ``prompt``) and ``VerseRules`` (with an
    acrostic or ``rules``), decoded with the KV cache in float64 and drawn with ``Mulberry32(seed)`` and
    ``sample``, up to ``<|endoftext|>``. Returns the text, the tokens after the start, and the smallest
    margins of ``sample`` over the steps (``tokens`` without the final ``<|endoftext|>``)."""
    model, vocab = reference_model()
    rules_filter = VerseRules(vocab, form, acrostic=acrostic, rhyme=rules, no_repeat=rules) \
        if (rules or acrostic) else None
    tokens = [vocab.stoi[poet_full.FORM_TOKENS[form]], *vocab.encode(prompt)]
    start, max_len = len(tokens), model.config.max_len
    cache = KVCache.from_config(model.config, batch_size=1, max_len=max_len, dtype=torch.float64)
    gen, gaps, shares = Mulberry32(seed), [], []
    while len(tokens) < max_len:
        logits = model.next_token_logits(torch.tensor([tokens[cache.pos:]]), cache=cache)[0].tolist()
        allowed = [True] * len(logits) if rules_filter is None else rules_filter.allowed(tokens).tolist()
        token, gap, share = sample(logits, allowed, temperature, top_k, gen())
        tokens.append(token)
        gaps.append(gap)
        shares.append(share)
        if token == vocab.eot:
            break
    new = [t for t in tokens[start:] if t != vocab.eot]
    return {"text": prompt + vocab.decode(new), "tokens": new, "logit_gap": min(gaps), "cdf_gap": min(shares)}


# --- Chromium (tools/common.py's browser layer), recording console messages and network requests ---------------

@contextlib.contextmanager
def recording_browser(folder: str | Path):
    """``(driver, base_url)``: ``common.webdriver(folder)`` that also records the console and every request."""
    logs = {"goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"}}
    with webdriver(Path(folder), capabilities=logs) as (driver, base):
        driver.set_script_timeout(120)
        yield driver, base


def requested_urls(driver) -> list[str]:
    """Every address the browser asked for since the last call (Chrome's performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def run_async(driver, script: str, *args):
    """Run JavaScript that may ``await`` in the page: it reads ``args`` and returns with ``done(value)``; an
    exception comes back as a ``RuntimeError``."""
    wrapped = ("const done = arguments[arguments.length - 1], args = [...arguments].slice(0, -1);\n"
               "(async () => {" + script + "})().catch((e) => done({error: String(e.stack || e)}));")
    got = driver.execute_async_script(wrapped, *args)
    if isinstance(got, dict) and "error" in got:
        raise RuntimeError(got["error"])
    return got


# The widget reports what it measured on its root element (web/poet/page.js: data-* attributes).
PRESS = """
const [acrostic] = args;
const root = document.getElementById("live-poet");
const input = root.querySelector(".poet-text");
input.value = acrostic; input.dispatchEvent(new Event("input"));
const before = performance.getEntriesByType("resource").concat(performance.getEntriesByType("navigation"))
  .reduce((s, e) => s + e.encodedBodySize, 0);
root.querySelector(".poet-go").click();
const wait = () => root.dataset.state === "done" || root.dataset.state === "error" ? done({
  state: root.dataset.state, message: root.querySelector(".poet-status").textContent, before,
  after: performance.getEntriesByType("resource").concat(performance.getEntriesByType("navigation"))
    .reduce((s, e) => s + e.encodedBodySize, 0),
  poem: [...root.querySelectorAll(".poet-poem .ch")].map((e) => e.textContent).join(""),
  stats: JSON.parse(root.dataset.stats || "{}")}) : setTimeout(wait, 50);
wait();
"""


def open_page(driver, url: str, width: int) -> None:
    """The chapter page at ``width`` px, scrolled to the widget."""
    driver.set_window_size(width, 900)
    driver.get(url)
    driver.execute_script("document.getElementById('live-poet').scrollIntoView()")


def press(driver, acrostic: str = "春夏秋冬") -> dict:
    """Type ``acrostic`` into the widget, press 写诗, wait for the poem: its state, status line, poem (without
    line breaks), stats, and the bytes the page had loaded before and after."""
    return run_async(driver, PRESS, acrostic)


def measure(html: str | Path, out: str | Path = WEB / "measurements.md") -> str:
    """Sizes and timings of the built chapter page in headless Chromium, written as a Markdown table."""
    html = Path(html)
    page = next((html / "book").glob("14_*.html")).relative_to(html).as_posix()
    manifest = json.loads((html / "poet" / MANIFEST).read_text(encoding="utf-8"))
    runs = []
    with recording_browser(html) as (driver, base):
        version = driver.capabilities.get("browserVersion", "?")
        for width in (390, 1366, 390, 1366):
            open_page(driver, f"{base}/{page}", width)
            runs.append(press(driver))
        delta = js_vs_torch(driver, base + "/poet/")
    size = {f.name: f.stat().st_size for f in WEB.iterdir() if f.suffix in (".js", ".css")}
    each = " / ".join
    rows = [("weights: int8, float32 scales and vectors", f"{manifest['bytes']:,} bytes"),
            ("poet.json: configuration, vocabulary, verse tables",
             f"{(html / 'poet' / MANIFEST).stat().st_size:,} bytes"),
            ("the widget before the first press: page.js, poet.css", f"{size['page.js'] + size['poet.css']:,} bytes"),
            ("the model's code, loaded on the first press: web/poet/*.js but page.js",
             f"{sum(size.values()) - size['page.js'] - size['poet.css']:,} bytes"),
            ("chapter page before the first press: HTML, CSS, JS, fonts, images", f"{runs[0]['before']:,} bytes"),
            ("chapter page after the first poem", f"{runs[0]['after']:,} bytes"),
            ("first press: weights fetched and dequantised", each(f"{r['stats']['load_ms']:.0f} ms" for r in runs)),
            ("time to first character once loaded: prefill and first step",
             each(f"{r['stats']['first_ms']:.1f} ms" for r in runs)),
            ("ms per character: mean over the poem's later steps",
             each(f"{r['stats']['ms_per_char']:.2f} ms" for r in runs)),
            ("largest difference between JS and PyTorch float64 logits", f"{delta:.1e}")]
    text = "\n".join([
        "# The poet in the page: sizes and timings", "",
        "Written by `python tools/poet_web.py measure _build/html`: chapter 14 served from localhost to headless "
        f"Chromium {version} on {cpu_name()}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC. "
        "Timings of four page loads (390, 1366, 390, 1366 px wide), one poem each (五绝, acrostic 春夏秋冬).", "",
        "| quantity | value |", "| --- | --- |", *(f"| {a} | {b} |" for a, b in rows), ""])
    Path(out).write_text(text, encoding="utf-8")
    return text


# Fixed inputs of the logit comparison: a real poem with its form token, and a poem's start under another form.
LOGIT_INPUTS = ["<|五绝|>床前看月光，疑是地上霜。\n举头望山月，低头思故乡。", "<|七律|>春风"]


def _ids(text: str, vocab) -> list[int]:
    form = next((f for f in poet_full.FORM_TOKENS.values() if text.startswith(f)), "")
    return ([vocab.stoi[form]] if form else []) + vocab.encode(text[len(form):])


JS_LOGITS = """
const [base, inputs] = args;
const {loadShipped} = await import(base + "poet_full.js");
const {KVCache} = await import(base + "kv_cache.js");
const poet = await loadShipped(base);
const out = [];
for (const ids of inputs) {
  const full = poet.model.forward(ids);                       // uncached: (T, V)
  const cache = new KVCache(poet.config.n_layers), stepwise = [];
  for (let t = 0; t < ids.length; t++) stepwise.push(poet.model.forward([ids[t]], {cache})[0]);
  const pack = (rows) => { const all = new Float64Array(rows.length * rows[0].length);
    rows.forEach((r, i) => all.set(r, i * r.length));
    let s = ""; const bytes = new Uint8Array(all.buffer);
    for (let i = 0; i < bytes.length; i += 8192) s += String.fromCharCode(...bytes.subarray(i, i + 8192));
    return btoa(s); };
  out.push([pack(full), pack(stepwise)]);
}
done(out);
"""


def js_logits(driver, base: str, inputs: list[list[int]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The page's model on ``inputs``: uncached logits ``(T, V)`` and the same one token at a time with the cache."""
    import base64

    got = run_async(driver, JS_LOGITS, base, inputs)
    return [tuple(np.frombuffer(base64.b64decode(b), "<f8").reshape(len(ids), -1) for b in pair)
            for pair, ids in zip(got, inputs)]


def js_vs_torch(driver, base: str) -> float:
    """max |Δ| between the page's logits and PyTorch's float64 forward on ``LOGIT_INPUTS``."""
    model, vocab = reference_model()
    inputs = [_ids(t, vocab) for t in LOGIT_INPUTS]
    with torch.no_grad():
        torch_logits = [model(torch.tensor([ids]))[0].numpy() for ids in inputs]
    return max(float(np.abs(js[0] - ref).max()) for js, ref in zip(js_logits(driver, base, inputs), torch_logits))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("export").add_argument("out_dir", type=Path)
    w = sub.add_parser("write")
    w.add_argument("text", nargs="?", default="", help="the acrostic (or with --prompt, the poem's start)")
    w.add_argument("--form", default="五绝", choices=list(poet_full.FORM_TOKENS))
    w.add_argument("--prompt", action="store_true")
    w.add_argument("--no-rules", action="store_true")
    w.add_argument("--temperature", type=float, default=0.8)
    w.add_argument("--top-k", type=int, default=20)
    w.add_argument("--seed", type=int, default=0)
    sub.add_parser("measure").add_argument("html", type=Path)
    args = parser.parse_args(argv)
    if args.command == "export":
        m = export(args.out_dir)
        print(f"{args.out_dir / m['bin']}: {m['bytes']:,} bytes; {args.out_dir / MANIFEST}")
    elif args.command == "write":
        text = {"prompt": args.text} if args.prompt else {"acrostic": args.text}
        print(write(args.form, **text, rules=not args.no_rules, temperature=args.temperature, top_k=args.top_k,
                    seed=args.seed)["text"])
    else:
        print(measure(args.html))


if __name__ == "__main__":
    main()
