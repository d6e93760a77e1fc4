// Python twin: src/transformer_course/block.py (TransformerBlock with PreNormResidual: x + f(norm(x))).
import { FeedForward } from "./ffn.js";
import { MultiHeadAttention } from "./multihead.js";
import { add } from "./nn.js";
import { LayerNorm } from "./norm.js";

export class TransformerBlock {
  constructor(state, prefix, config) {
    this.selfAttn = new MultiHeadAttention(state, `${prefix}.self_attn`, config.n_heads);
    this.selfAttnNorm = new LayerNorm(state, `${prefix}.self_attn_residual.norm`, config.norm_eps);
    this.ffn = new FeedForward(state, `${prefix}.ffn`);
    this.ffnNorm = new LayerNorm(state, `${prefix}.ffn_residual.norm`, config.norm_eps);
  }

  // xs: T vectors (C,) -> T vectors (C,); trace: a list that gets this block's attention weights
  forward(xs, { cache = null, trace = null } = {}) {
    const attn = this.selfAttn.forward(xs.map((x) => this.selfAttnNorm.forward(x)), cache);
    if (trace) trace.push(attn.weights);
    xs = xs.map((x, t) => add(x, attn.out[t]));
    return xs.map((x) => add(x, this.ffn.forward(this.ffnNorm.forward(x))));
  }
}
