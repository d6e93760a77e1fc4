// Python twin: src/transformer_course/attention.py (scaled_dot_product_attention, causal_mask).

// softmax(q·kⱼ · scale) over the keys, then the weighted sum of the values: for one query of one head.
// q (d,), keys and values: arrays of (d,) vectors (the keys this query may see). Returns
// {out (d,), weights (Tk,)}; the weights are non-negative and sum to 1.
export function scaledDotProductAttention(q, keys, values, scale = 1 / Math.sqrt(q.length)) {
  const scores = keys.map((k) => q.reduce((s, qi, i) => s + qi * k[i], 0) * scale);
  const max = Math.max(...scores);
  const exps = scores.map((s) => Math.exp(s - max));  // minus the max: no overflow
  const total = exps.reduce((s, e) => s + e, 0);
  const weights = Float64Array.from(exps, (e) => e / total);
  const out = new Float64Array(q.length);
  values.forEach((v, j) => { for (let i = 0; i < out.length; i++) out[i] += weights[j] * v[i]; });
  return { out, weights };
}

// The causal mask of causalMask(Tq, Tk), row by row: query t (of the Tq newest) sees keys 0 .. t + Tk - Tq.
export function visibleKeys(t, tQ, tK) {
  return t + tK - tQ + 1;
}
