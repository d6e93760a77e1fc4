// Python twin: src/transformer_course/ffn.py (FeedForward with the exact GELU, as nn.GELU()).
import { Linear } from "./nn.js";

// erf(x) = 2/√π · e^(−x²) · Σ_n 2ⁿ x^(2n+1) / (1·3·…·(2n+1)): every term positive, so no cancellation;
// JavaScript's Math has no erf. |x| ≥ 6: erf is ±1 to float64 precision (erfc(6) ≈ 2e-17).
export function erf(x) {
  const a = Math.abs(x);
  if (a >= 6) return Math.sign(x);
  let term = a, sum = a;
  for (let n = 1; term > 1e-17 * sum; n++) {
    term *= (2 * a * a) / (2 * n + 1);
    sum += term;
  }
  return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * Math.exp(-a * a) * sum;
}

// GELU(x) = x · Φ(x) = x/2 · (1 + erf(x/√2))
export function gelu(x) {
  return 0.5 * x * (1 + erf(x * Math.SQRT1_2));
}

// down(gelu(up(x))): up C -> d_ff, down d_ff -> C; (C,) -> (C,), the same MLP at every position.
export class FeedForward {
  constructor(state, prefix) {
    this.up = new Linear(state[`${prefix}.up.weight`], state[`${prefix}.up.bias`]);
    this.down = new Linear(state[`${prefix}.down.weight`], state[`${prefix}.down.bias`]);
  }

  forward(x) {
    return this.down.forward(this.up.forward(x).map(gelu));
  }
}
