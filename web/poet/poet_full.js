// Python twin: src/transformer_course/poet_full.py (load_shipped: int8 weights, one float32 scale per row,
// dequantised to float32 exactly as PyTorch does; write: a poem started by its form token, under VerseRules).
import { generateSteps } from "./generate.js";
import { DecoderOnly } from "./models.js";
import { VerseRules } from "./poetics.js";

// Read base + "poet.json" and the binary it names (tools/poet_web.py export); onProgress(bytesRead, total).
// Returns {model, config, vocab, state}: the shipped poet, its vocabulary and its float32 weights by name.
export async function loadShipped(base, onProgress = () => {}) {
  const manifest = await (await fetch(new URL("poet.json", base))).json();
  const response = await fetch(new URL(manifest.bin, base));
  if (!response.ok) throw new Error(`${manifest.bin}: HTTP ${response.status}`);
  const blob = new Uint8Array(manifest.bytes);
  const reader = response.body.getReader();
  for (let read = 0; ;) {
    const { done, value } = await reader.read();
    if (done) break;
    blob.set(value, read);
    read += value.length;
    onProgress(read, manifest.bytes);
  }
  const state = {};
  for (const t of manifest.tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if ("q" in t) {  // W = q · scale, rounded to float32 like PyTorch's float32 product (exact in float64 first)
      const q = new Int8Array(blob.buffer, t.q, n), scale = new Float32Array(blob.buffer, t.scale, t.shape[0]);
      const data = new Float32Array(n), cols = n / t.shape[0];
      for (let r = 0; r < t.shape[0]; r++) {
        for (let i = r * cols; i < (r + 1) * cols; i++) data[i] = q[i] * scale[r];
      }
      state[t.name] = { data, shape: t.shape };
    } else {
      state[t.name] = { data: new Float32Array(blob.buffer.slice(t.w, t.w + 4 * n)), shape: t.shape };
    }
  }
  const itos = manifest.itos;
  const vocab = { itos, stoi: Object.fromEntries(itos.map((s, i) => [s, i])), eot: 0, unk: 1,
                  formTokens: manifest.form_tokens, verse: manifest.verse };
  return { model: new DecoderOnly(state, manifest.config), config: manifest.config, vocab, state };
}

// One poem, one step at a time: yields {token, position, firstQuery, attention} for each new token, up to
// <|endoftext|> (not yielded); attention[q][layer][head] are the weights of query position firstQuery + q
// (the positions this step fed: the whole start in the first step, then the token before this one).
// Started by the form's token and `prompt`; with an acrostic or `rules`, decoded under VerseRules (rules:
// also the rhyme and no immediate repeat), like poet_full.write. eot 0 and unk 1: CharVocab's convention.
export function* write({ model, config, vocab }, { form, prompt = "", acrostic = "", rules = true,
                                                  temperature = 0.8, topK = 20, seed = 0 }) {
  const verse = rules || acrostic ? new VerseRules(vocab, form, { acrostic, rhyme: rules, noRepeat: rules }) : null;
  const idx = [vocab.stoi[vocab.formTokens[form]], ...[...prompt].map((c) => vocab.stoi[c] ?? vocab.unk)];
  const steps = generateSteps(model, idx, config.max_len - idx.length, {
    temperature, topK, seed, logitsFilter: verse && ((tokens) => verse.allowed(tokens)) });
  for (const step of steps) {
    if (step.token === vocab.eot) return;
    const position = step.tokens.length - 1;
    yield { token: step.token, position, firstQuery: position - step.attention.length, attention: step.attention };
  }
}
