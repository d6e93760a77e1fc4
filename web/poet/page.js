// The live poet on chapter 14's page: a form, a poem written character by character, and the attention view.
// Loaded by a markdown cell of book/14_tang_poet.ipynb (<div id="live-poet">, <script type="module">);
// the model code and its weights (tools/poet_web.py export, written into poet/ by the build) load on the
// first press. The root element reports data-state (idle, loading, writing, done, error) and, for the
// tests and tools/poet_web.py measure, data-stats (load_ms, first_ms, ms_per_char, chars).

const HERE = new URL(".", import.meta.url);
const FORMS = ["五绝", "七绝", "五律", "七律"];
const STOPS = "，。？！；";
const MIN_MS_PER_CHAR = 30;  // pacing, so that the reader sees the poem being written

function element(tag, attributes = {}, ...children) {
  const e = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "class") e.className = value;
    else if (key === "text") e.textContent = value;
    else e.setAttribute(key, value);
  }
  e.append(...children);
  return e;
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function setUp(root) {
  document.head.append(element("link", { rel: "stylesheet", href: new URL("poet.css", HERE) }));
  const ui = {
    form: element("select", { class: "poet-form" }, ...FORMS.map((f) => element("option", { text: f }))),
    mode: element("select", { class: "poet-mode" }, element("option", { value: "acrostic", text: "藏头" }),
                  element("option", { value: "prompt", text: "开头" })),
    text: element("input", { class: "poet-text", type: "text", value: "春夏秋冬", "aria-label": "藏头的字或诗的开头" }),
    temperature: element("input", { class: "poet-temperature", type: "range", min: "0.1", max: "1.5",
                                     step: "0.05", value: "0.8" }),
    topK: element("input", { class: "poet-topk", type: "range", min: "1", max: "100", step: "1", value: "20" }),
    seed: element("input", { class: "poet-seed", type: "number", min: "0", step: "1", value: "1" }),
    rules: element("input", { class: "poet-rules", type: "checkbox", checked: "" }),
    go: element("button", { class: "poet-go", type: "button", text: "写诗" }),
    status: element("p", { class: "poet-status", "aria-live": "polite",
                           text: "诗人在你的浏览器里写诗：第一次按「写诗」时下载它的权重，之后不再联网。" }),
    poem: element("div", { class: "poet-poem", lang: "zh" }),
    attention: element("div", { class: "poet-attention", hidden: "" }),
  };
  const shown = (input, format) => {
    const out = element("output", { text: format(input.value) });
    input.addEventListener("input", () => { out.textContent = format(input.value); });
    return out;
  };
  const field = (label, ...inputs) => element("label", { class: "poet-field" }, element("span", { text: label }), ...inputs);
  const placeholder = () => {
    ui.text.placeholder = ui.mode.value === "acrostic" ? "每句开头的字，如 春夏秋冬" : "诗的开头，如 白日依山尽，";
  };
  ui.mode.addEventListener("change", placeholder);
  placeholder();
  root.replaceChildren(element("div", { class: "poet-controls" },
    field("体裁", ui.form), field("方式", ui.mode), element("label", { class: "poet-field poet-wide" }, ui.text),
    field("温度", ui.temperature, shown(ui.temperature, (v) => Number(v).toFixed(2))),
    field("top-k", ui.topK, shown(ui.topK, (v) => v)), field("种子", ui.seed),
    element("label", { class: "poet-field poet-check" }, ui.rules, element("span", { text: "押韵、不重复" })),
    ui.go), ui.status, ui.poem, ui.attention,
    element("p", { class: "poet-print", text: "（本书网页版的这里有一个在浏览器里运行的诗人：选一种体裁、输入藏头的字，" +
                                              "它就现场写一首诗，还能看它写每个字时的注意力。）" }));
  root.dataset.state = "idle";
  return ui;
}

// What the reader typed, checked against the form and the vocabulary; a Chinese message when it does not fit.
function request(ui, poet) {
  const form = ui.form.value, rules = ui.rules.checked;
  const text = ui.text.value.replace(/\s/g, "");
  const { VerseRules, SHAPES } = poet.poetics;
  const unknown = [...text].filter((c) => !(c in poet.vocab.stoi));
  if (unknown.length) throw new Error(`诗人的字表里没有「${unknown.join("")}」，换几个字试试。`);
  const options = { form, rules, temperature: Number(ui.temperature.value), topK: Number(ui.topK.value),
                    seed: Number(ui.seed.value) >>> 0 };
  if (ui.mode.value === "acrostic") {
    const [clauses] = SHAPES[form];
    if ([...text].length > clauses) throw new Error(`${form}只有 ${clauses} 句，藏头最多 ${clauses} 个字。`);
    if ([...text].some((c) => poet.vocab.verse.han[poet.vocab.stoi[c]] !== "1")) {
      throw new Error("藏头只能是汉字。");
    }
    return { ...options, acrostic: text };
  }
  if (rules) {
    const start = [poet.vocab.stoi[poet.vocab.formTokens[form]], ...[...text].map((c) => poet.vocab.stoi[c])];
    try {
      new VerseRules(poet.vocab, form, {}).allowed(start);
    } catch {
      const n = SHAPES[form][1];
      throw new Error(`开头不合${form}的格式：每句 ${n} 个字，句末是「，」或「。」（或者取消「押韵、不重复」）。`);
    }
  }
  return { ...options, prompt: text };
}

// The poem on screen: one button per token, in lines of two clauses; tapping one opens the attention view.
function showToken(ui, vocab, position, token, onTap) {
  const s = vocab.itos[token];
  if (s === "\n") {
    ui.poem.append(element("br"));
    return;
  }
  const button = element("button", { class: "ch", type: "button", "data-pos": String(position), text: s });
  button.addEventListener("click", () => onTap(position));
  ui.poem.append(button);
}

function heat(weight) {
  return `rgba(214, 69, 30, ${Math.sqrt(weight).toFixed(3)})`;  // square root: small weights stay visible
}

// Each head of one layer: the earlier tokens coloured by the weight the head gave them when it chose `position`.
// view.layer: the layer shown (the reader's choice, kept from one tapped character to the next).
function showAttention(ui, poet, written, position, view) {
  const weights = written.attention[position - 1];  // the query that chose this token: the one before it
  if (!weights) return;
  const { itos } = poet.vocab, layer = view.layer;
  const layers = element("div", { class: "poet-layers", role: "group", "aria-label": "层" },
    ...weights.map((_, l) => {
      const b = element("button", { type: "button", class: l === layer ? "on" : "", text: `第 ${l + 1} 层` });
      b.addEventListener("click", () => showAttention(ui, poet, written, position, Object.assign(view, { layer: l })));
      return b;
    }));
  const label = (token) => (token === 0 || itos[token].length > 1 ? `〈${itos[token].replace(/[<|>]/g, "")}〉`
                            : itos[token] === "\n" ? "↵" : itos[token]);
  const heads = weights[layer].map((row, h) => {
    const keys = element("div", { class: "poet-keys" });
    row.forEach((w, j) => {
      const token = written.tokens[j];
      keys.append(element("span", { class: "key", style: `background:${heat(w)}`, title: w.toFixed(3),
                                    text: label(token) }));
      const next = written.tokens[j + 1];
      if (j === 0 || itos[token] === "\n" || (STOPS.includes(itos[token]) && itos[next] !== "\n")) {
        keys.append(element("br"));
      }
    });
    keys.append(element("span", { class: "key target", text: itos[written.tokens[position]] }));
    return element("figure", { class: "poet-head" }, element("figcaption", { text: `头 ${h + 1}` }), keys);
  });
  ui.attention.hidden = false;
  ui.attention.replaceChildren(
    element("p", { class: "poet-attention-title",
                   text: `写「${itos[written.tokens[position]]}」时，第 ${layer + 1} 层的 ${heads.length} 个头` +
                         `各自在看前面的哪些字（共 ${weights.length} 层）` }),
    layers, element("div", { class: "poet-heads" }, ...heads),
    element("p", { class: "poet-legend", text: "颜色越深，权重越大（按权重的平方根着色，小的权重也看得见）；每个头的权重加起来是 1。" +
                                                  "点诗里的另一个字，换一个位置。" }));
  for (const b of ui.poem.querySelectorAll(".ch")) b.classList.toggle("picked", Number(b.dataset.pos) === position);
}

async function main() {
  const root = document.getElementById("live-poet");
  if (!root) return;
  const ui = setUp(root);
  let poet = null, loadMs = 0;
  const view = { layer: 0 };
  ui.go.addEventListener("click", async () => {
    ui.go.disabled = true;
    root.dataset.state = "writing";
    try {
      if (!poet) {
        root.dataset.state = "loading";
        ui.status.textContent = "正在下载诗人的权重……";
        const start = performance.now();
        const [{ loadShipped, write }, poetics] = await Promise.all([import("./poet_full.js"), import("./poetics.js")]);
        const loaded = await loadShipped(HERE, (read, total) => {
          ui.status.textContent = `正在下载诗人的权重：${(read / 1e6).toFixed(1)} / ${(total / 1e6).toFixed(1)} MB`;
        });
        poet = { ...loaded, write, poetics };
        loadMs = performance.now() - start;
      }
      const options = request(ui, poet);
      root.dataset.state = "writing";
      ui.status.textContent = "诗人在写……";
      ui.poem.replaceChildren();
      ui.attention.hidden = true;
      const form = poet.vocab.stoi[poet.vocab.formTokens[options.form]];
      const start = [form, ...[...(options.prompt || "")].map((c) => poet.vocab.stoi[c])];
      const written = { tokens: [...start], attention: [] };
      const tap = (position) => showAttention(ui, poet, written, position, view);
      start.slice(1).forEach((token, i) => showToken(ui, poet.vocab, i + 1, token, tap));
      const steps = poet.write(poet, options), times = [];
      for (;;) {
        const t0 = performance.now();
        const { value: step, done } = steps.next();
        const ms = performance.now() - t0;
        if (done) break;
        times.push(ms);
        step.attention.forEach((w, q) => { written.attention[step.firstQuery + q] = w; });
        written.tokens.push(step.token);
        showToken(ui, poet.vocab, step.position, step.token, tap);
        await pause(Math.max(0, MIN_MS_PER_CHAR - ms));
      }
      const later = times.slice(1);
      const stats = { load_ms: loadMs, first_ms: times[0], chars: times.length,
                      ms_per_char: later.reduce((s, t) => s + t, 0) / Math.max(1, later.length) };
      root.dataset.stats = JSON.stringify(stats);
      ui.status.textContent = `种子 ${options.seed}：${stats.chars} 个 token（字、标点、换行），第一个用了 ` +
        `${stats.first_ms.toFixed(0)} ms，之后平均每个 ${stats.ms_per_char.toFixed(1)} ms（在你的浏览器里算）。` +
        "点诗里的字，看注意力。";
      ui.seed.value = String(options.seed + 1);  // the next press writes another poem
      root.dataset.state = "done";
    } catch (error) {
      root.dataset.state = "error";
      ui.status.textContent = error.message.match(/[\u4e00-\u9fff]/) ? error.message : `出错了：${error.message}`;
    } finally {
      ui.go.disabled = false;
    }
  });
}

main();
