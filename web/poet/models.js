// Python twin: src/transformer_course/models.py (TransformerStack, DecoderOnly), for the shipped poet's
// choices: learned positions, pre-LN blocks, a final LayerNorm, the output layer tied to the token embedding.
import { TransformerBlock } from "./block.js";
import { Embedding, Linear, add } from "./nn.js";
import { LayerNorm } from "./norm.js";
import { LearnedPositions } from "./positional.js";

const SHIPPED = { positional: "learned", norm: "layernorm", norm_position: "pre", activation: "gelu",
                  tie_embeddings: true, sliding_window: null, n_experts: null };

export class TransformerStack {
  constructor(state, config) {
    const other = Object.keys(SHIPPED).filter((key) => config[key] !== SHIPPED[key]);
    if (other.length || (config.n_kv_heads ?? config.n_heads) !== config.n_heads) {
      throw new Error(`this forward pass is the shipped poet's architecture only; config differs in ${other}`);
    }
    this.config = config;
    this.tokEmb = new Embedding(state["transformer.tok_emb.weight"]);
    this.posEmb = new LearnedPositions(state, "transformer.pos_emb");
    this.blocks = Array.from({ length: config.n_layers },
                             (_, i) => new TransformerBlock(state, `transformer.blocks.${i}`, config));
    this.finalNorm = new LayerNorm(state, "transformer.final_norm", config.norm_eps);
  }

  // idx: T token ids at positions cache.pos .. cache.pos+T-1 (0 .. T-1 without a cache) -> T vectors (C,).
  // trace: a list that gets, per layer, the attention weights [query][head] -> (keys,).
  forward(idx, { cache = null, trace = null } = {}) {
    const start = cache ? cache.pos : 0;
    if (start + idx.length > this.config.max_len) throw new Error(`at most ${this.config.max_len} positions`);
    let xs = idx.map((id, t) => add(this.tokEmb.forward(id), this.posEmb.forward(start + t)));
    this.blocks.forEach((block, i) => {
      xs = block.forward(xs, { cache: cache && cache.layer(i), trace });
    });
    if (cache) cache.advance(idx.length);  // every layer has stored the new positions
    return xs.map((x) => this.finalNorm.forward(x));
  }
}

export class DecoderOnly {
  constructor(state, config) {
    this.config = config;
    this.transformer = new TransformerStack(state, config);
    this.lmHead = new Linear(state["transformer.tok_emb.weight"]);  // tied: the embedding's (V, C) matrix
  }

  // Logits (V,) at every position of idx (T ids); with a cache, idx holds only the new tokens.
  forward(idx, options = {}) {
    return this.transformer.forward(idx, options).map((h) => this.lmHead.forward(h));
  }

  // Logits (V,) of the token after idx: the output layer runs at the last position only.
  nextTokenLogits(idx, options = {}) {
    const hidden = this.transformer.forward(idx, options);
    return this.lmHead.forward(hidden[hidden.length - 1]);
  }
}
