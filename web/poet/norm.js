// Python twin: src/transformer_course/norm.py (LayerNorm; the shipped poet has no RMSNorm).
// Statistics over the features of one position only: (C,) -> (C,).

export class LayerNorm {
  // state: the exported tensors by their PyTorch names; prefix: e.g. "transformer.final_norm"
  constructor(state, prefix, eps = 1e-5) {
    this.weight = state[`${prefix}.weight`].data;  // (C,) the learned gain γ
    this.bias = state[`${prefix}.bias`].data;      // (C,) the learned shift β
    this.eps = eps;
  }

  // (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance (divide by C)
  forward(x) {
    const C = x.length;
    const mean = x.reduce((s, v) => s + v, 0) / C;
    const variance = x.reduce((s, v) => s + (v - mean) ** 2, 0) / C;
    const rstd = 1 / Math.sqrt(variance + this.eps);
    return x.map((v, i) => (v - mean) * rstd * this.weight[i] + this.bias[i]);
  }
}
