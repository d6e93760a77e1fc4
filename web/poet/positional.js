// Python twin: src/transformer_course/positional.py (LearnedPositions: a trained vector per position).
import { Embedding } from "./nn.js";

export class LearnedPositions {
  constructor(state, prefix) {
    this.embedding = new Embedding(state[`${prefix}.embedding.weight`]);  // (max_len, C)
  }

  forward(position) {
    return this.embedding.forward(position);  // (C,)
  }
}
