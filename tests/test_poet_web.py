"""Chapter 14's live poet (web/poet/, tools/poet_web.py).

The export reads back as ``load_shipped``'s float32 weights bit for bit, in Python and in the page. In
headless Chromium, the page's JavaScript gives PyTorch's float64 logits (within 1e-9; measured ~1e-14), the
same bits with and without its KV cache, and the same seeded poems as the Python reference of its sampler; in
the built chapter at 390 px the widget fetches nothing before the first press and nothing from outside the
local server, writes an acrostic poem and shows the attention of every head on a tapped character. The browser
tests need Debian's ``chromium`` and ``chromium-driver`` and skip without them, unless ``TC_REQUIRE_BROWSER=1``.
"""
import hashlib
import json
import os
import re
import time

import numpy as np
import pytest
import torch

import common
import poet_web
import preview
from transformer_course import poet_full, poetics

JS_TOLERANCE = 1e-9  # float64 on both sides; only the order of the sums differs


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("export")
    poet_web.export(out)
    return out


def test_the_export_dequantises_to_the_shipped_weights_bit_for_bit(exported):
    state = poet_full.load_shipped()[0].state_dict()
    got = poet_web.dequantised(exported)
    assert set(got) == set(state) - {"lm_head.weight"}  # the tied output layer is the embedding, stored once
    assert not [name for name in got if not torch.equal(got[name], state[name])]
    manifest = json.loads((exported / poet_web.MANIFEST).read_text(encoding="utf-8"))
    blob = (exported / manifest["bin"]).read_bytes()
    assert manifest["source_sha256"] == poet_full.SHIPPED_SHA256
    assert hashlib.sha256(blob).hexdigest() == manifest["bin_sha256"] and len(blob) == manifest["bytes"]
    n_params = sum(p.numel() for p in poet_full.load_shipped()[0].parameters())
    assert n_params < len(blob) < 1.03 * n_params  # one byte per weight, plus scales, vectors and padding


def test_the_python_reference_keeps_the_form_the_acrostic_and_the_rhyme():
    out = poet_web.write("七绝", acrostic="明月清风", seed=3)
    clauses = poetics.clauses(out["text"])
    assert poetics.regular_form(out["text"]) == "七绝" and [c[0] for c in clauses] == list("明月清风")
    assert poetics.rhymes(out["text"]) is True
    assert poet_web.Mulberry32(7)() == poet_web.Mulberry32(7)() != poet_web.Mulberry32(8)()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The preface and chapter 14, built from the stored outputs: the widget and the weights in poet/."""
    out = tmp_path_factory.mktemp("book14")
    result = preview.build(preview.stored_output_config(out, ["book/14_tang_poet"]))
    log = result.stdout + result.stderr
    # the preface links every chapter, which this two-page book lacks: its warnings only
    assert not [line for line in log.splitlines() if "WARNING" in line and "intro.md" not in line], log[-3000:]
    html = out / "_build" / "html"
    assert (html / "poet" / "page.js").exists() and (html / "poet" / poet_web.MANIFEST).exists()
    return html


@pytest.fixture(scope="module")
def browser(site):
    missing = common.browser_missing()
    if missing:
        if os.environ.get("TC_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests need {missing}")
        pytest.skip(f"browser tests need {missing}")
    with poet_web.recording_browser(site) as (driver, base):
        driver.get(f"{base}/poet/")  # a page of the site (its folder listing): the modules are imported from there
        yield driver, base


JS_WEIGHTS = """
const [base] = args;
const {loadShipped} = await import(base + "poet_full.js");
const {state} = await loadShipped(base);
const hex = (buffer) => [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");
const digests = {};
for (const [name, t] of Object.entries(state)) digests[name] = hex(await crypto.subtle.digest("SHA-256", t.data));
done(digests);
"""


def test_the_page_dequantises_to_the_shipped_weights_bit_for_bit(browser):
    driver, base = browser
    state = poet_full.load_shipped()[0].state_dict()
    digests = poet_web.run_async(driver, JS_WEIGHTS, base + "/poet/")
    assert set(digests) == set(state) - {"lm_head.weight"}
    assert not [name for name, digest in digests.items()
                if digest != hashlib.sha256(state[name].numpy().astype("<f4").tobytes()).hexdigest()]


@pytest.fixture(scope="module")
def js_logits(browser):
    driver, base = browser
    _, vocab = poet_web.reference_model()
    inputs = [poet_web._ids(text, vocab) for text in poet_web.LOGIT_INPUTS]
    return inputs, poet_web.js_logits(driver, base + "/poet/", inputs)


def test_js_logits_equal_pytorch_float64(js_logits):
    model, _ = poet_web.reference_model()
    for ids, (full, _) in zip(*js_logits):
        with torch.no_grad():
            expected = model(torch.tensor([ids]))[0].numpy()  # (T, V) in float64
        delta = float(np.abs(full - expected).max())
        assert delta < JS_TOLERANCE, f"max |JS - PyTorch| = {delta:.1e} over {len(ids)} positions"


def test_js_cached_equals_uncached(js_logits):
    for ids, (full, cached) in zip(*js_logits):
        assert np.array_equal(full, cached), float(np.abs(full - cached).max())  # same sums, same order


CASES = [dict(form="五绝", acrostic="春夏秋冬", seed=1), dict(form="七绝", acrostic="明月清风", seed=7, top_k=50),
         dict(form="五律", acrostic="山高水长", seed=11, rules=False, temperature=1.0),
         dict(form="七律", prompt="春风", seed=5), dict(form="五绝", seed=3, rules=False, temperature=0.5, top_k=0)]
JS_WRITE = """
const [base, cases] = args;
const {loadShipped, write} = await import(base + "poet_full.js");
const poet = await loadShipped(base);
done(cases.map((c) => [...write(poet, c)].map((step) => step.token)));
"""


def test_seeded_sampling_gives_the_python_references_tokens(browser):
    driver, base = browser
    js_cases = [{("topK" if k == "top_k" else k): v for k, v in c.items()} for c in CASES]
    got = poet_web.run_async(driver, JS_WRITE, base + "/poet/", js_cases)
    for case, tokens in zip(CASES, got):
        form = case["form"]
        reference = poet_web.write(**case)
        assert tokens == reference["tokens"], (case, reference["text"])
        # not by luck: every draw was far from a boundary that a 1e-9 change of the logits could cross
        assert reference["logit_gap"] > 1e-6 and reference["cdf_gap"] > 1e-6, (case, reference)
        if case.get("acrostic"):
            heads = [c[0] for c in poetics.clauses(reference["text"])]
            assert heads[: len(case["acrostic"])] == list(case["acrostic"])  # a 律诗 has 8 clauses
            assert poetics.regular_form(reference["text"]) == form


def test_the_widget_writes_an_acrostic_on_a_phone_and_shows_the_attention(browser):
    from selenium.webdriver.common.by import By

    driver, base = browser
    driver.get_log("browser"), poet_web.requested_urls(driver)  # start both logs here
    poet_web.open_page(driver, f"{base}/book/14_tang_poet.html", 390)
    time.sleep(0.5)
    page_load = poet_web.requested_urls(driver)
    assert not [u for u in page_load if "poet.json" in u or u.endswith(".bin")], "weights fetched before the press"
    assert not [m for m in driver.get_log("browser") if m["level"] == "SEVERE"]  # the page loads cleanly

    result = poet_web.press(driver, "春夏秋冬")
    assert result["state"] == "done", result["message"]
    clauses = re.findall(r"([^，。]+)[，。]", result["poem"])
    assert [c[0] for c in clauses] == list("春夏秋冬") and {len(c) for c in clauses} == {5}, result["poem"]
    assert result["poem"] == poet_web.write("五绝", acrostic="春夏秋冬", seed=1)["text"].replace("\n", "")

    chars = driver.find_elements(By.CSS_SELECTOR, "#live-poet .poet-poem .ch")
    chars[8].click()  # 下 of 夏日下黄花: position 9, after the form token and 8 tokens
    time.sleep(0.2)
    heads = driver.find_elements(By.CSS_SELECTOR, "#live-poet .poet-head")
    assert len(heads) == poet_web.reference_model()[0].config.n_heads
    for head in heads:
        weights = [float(k.get_attribute("title")) for k in head.find_elements(By.CSS_SELECTOR, ".key:not(.target)")]
        assert len(weights) == 9 and abs(sum(weights) - 1) < 0.01  # keys 0..8, each shown to 3 decimals
    driver.find_elements(By.CSS_SELECTOR, "#live-poet .poet-layers button")[-1].click()
    assert "第 4 层" in driver.find_element(By.CSS_SELECTOR, "#live-poet .poet-attention-title").text
    assert driver.execute_script("const e = document.documentElement; return e.scrollWidth <= e.clientWidth")

    assert not [m for m in driver.get_log("browser") if m["level"] == "SEVERE"]
    after = poet_web.requested_urls(driver)
    assert any(u.endswith(".bin") for u in after)
    assert not [u for u in page_load + after if not u.startswith((base, "data:", "blob:"))]
