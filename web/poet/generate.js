// Python twin: src/transformer_course/generate.py (generate_steps: prefill, then one token at a time with
// the KV cache). The draw is the page's own, the same in tools/poet_web.py (Mulberry32, sample), so that a
// seed gives the same poem in Python: torch.multinomial's generator cannot be reproduced here.
import { KVCache } from "./kv_cache.js";

// mulberry32 (Tommy Ettinger): 32-bit integer state, each call a float in [0, 1) with 32 random bits.
export function mulberry32(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1) >>> 0;
    t = (((t + (Math.imul(t ^ (t >>> 7), t | 61) >>> 0)) >>> 0) ^ t) >>> 0;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// One token from logits (V,) among the allowed ones (a 0/1 array, or null: all): the topK largest (0: all;
// ties to the smaller id), weights exp((l - l_max) / temperature), the first whose running sum exceeds
// u · total. temperature 0: the largest.
export function sample(logits, allowed, temperature, topK, u) {
  const order = [];
  for (let i = 0; i < logits.length; i++) if (!allowed || allowed[i]) order.push(i);
  order.sort((a, b) => logits[b] - logits[a] || a - b);
  if (temperature === 0) return order[0];
  const k = topK > 0 ? Math.min(topK, order.length) : order.length;
  const weights = order.slice(0, k).map((i) => Math.exp((logits[i] - logits[order[0]]) / temperature));
  const total = weights.reduce((s, w) => s + w, 0);  // left to right, as tools/poet_web.py sums
  const target = u * total;
  let before = 0;
  for (let j = 0; j < k; j++) {
    if (target < before + weights[j]) return order[j];
    before += weights[j];
  }
  throw new Error("u must be in [0, 1)");
}

// Continue idx (token ids) by up to maxNewTokens tokens, one step per next(): each step yields
// {token, logits, tokens, attention}, attention[query][layer][head] -> weights over the keys, for every
// query the step fed (the whole prompt in the first step). logitsFilter(tokens) -> allowed (0/1 per token).
export function* generateSteps(model, idx, maxNewTokens,
                                { temperature = 1, topK = 0, seed = 0, logitsFilter = null } = {}) {
  const random = mulberry32(seed);
  const cache = new KVCache(model.config.n_layers);
  const tokens = [...idx];
  for (let n = 0; n < maxNewTokens; n++) {
    const fed = tokens.slice(cache.pos);  // the prompt first (prefill), then the newest token
    const trace = [];
    const logits = model.nextTokenLogits(fed, { cache, trace });
    const allowed = logitsFilter && logitsFilter(tokens);
    const token = sample(logits, allowed, temperature, topK, random());
    tokens.push(token);
    const attention = fed.map((_, q) => trace.map((layer) => layer[q]));
    yield { token, logits, tokens, attention };
  }
}
