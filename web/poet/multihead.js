// Python twin: src/transformer_course/multihead.py (MultiHeadAttention: self-attention with the fused
// qkv_proj, split into heads, attend, merge, out_proj).
import { scaledDotProductAttention, visibleKeys } from "./attention.js";
import { Linear } from "./nn.js";

export class MultiHeadAttention {
  constructor(state, prefix, nHeads) {
    this.qkvProj = new Linear(state[`${prefix}.qkv_proj.weight`], state[`${prefix}.qkv_proj.bias`]);  // [W_Q; W_K; W_V]
    this.outProj = new Linear(state[`${prefix}.out_proj.weight`], state[`${prefix}.out_proj.bias`]);  // W_O
    this.dModel = this.outProj.outFeatures;
    this.nHeads = nHeads;
    this.dHead = this.dModel / nHeads;
  }

  // xs: T vectors (C,), the newest positions; cache: this layer's part of a KVCache, or null (xs is the
  // whole sequence). Returns {out: T vectors (C,), weights: per query, per head, the weights over its keys}.
  forward(xs, cache = null) {
    const C = this.dModel, d = this.dHead;
    const qkv = xs.map((x) => this.qkvProj.forward(x));  // (T, 3C)
    const q = qkv.map((r) => r.subarray(0, C));
    let k = qkv.map((r) => r.subarray(C, 2 * C));
    let v = qkv.map((r) => r.subarray(2 * C));
    if (cache) [k, v] = cache.update(k, v);  // (Tk, C) each: every key and value so far
    const head = (vectors, h) => vectors.map((x) => x.subarray(h * d, (h + 1) * d));  // split_heads
    const weights = [];
    const out = q.map((qt, t) => {
      const seen = visibleKeys(t, xs.length, k.length);  // causal: the keys up to this query's position
      const merged = new Float64Array(C);  // merge_heads: head h's output at features h·d .. (h+1)·d
      weights.push([]);
      for (let h = 0; h < this.nHeads; h++) {
        const a = scaledDotProductAttention(qt.subarray(h * d, (h + 1) * d), head(k.slice(0, seen), h),
                                            head(v.slice(0, seen), h));
        merged.set(a.out, h * d);
        weights[t].push(a.weights);
      }
      return this.outProj.forward(merged);
    });
    return { out, weights };
  }
}
