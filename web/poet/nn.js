// The two layers of torch.nn that the package's modules are made of, on float64 vectors (JS numbers).
// A weight is {data: Float32Array, shape: [rows, cols]}, row-major, as PyTorch stores it.

// nn.Linear: y = W x + b, W (out, in); x (in,) -> y (out,). Summed in float64, left to right.
export class Linear {
  constructor(weight, bias = null) {
    [this.outFeatures, this.inFeatures] = weight.shape;
    this.weight = weight.data;
    this.bias = bias && bias.data;
  }

  forward(x) {
    const W = this.weight, n = this.inFeatures, y = new Float64Array(this.outFeatures);
    for (let o = 0; o < y.length; o++) {
      let s = 0;
      for (let i = 0, row = o * n; i < n; i++) s += W[row + i] * x[i];
      y[o] = this.bias ? s + this.bias[o] : s;
    }
    return y;
  }
}

// nn.Embedding: row `index` of the table (V, C) as a float64 vector (C,).
export class Embedding {
  constructor(weight) {
    [this.numEmbeddings, this.dim] = weight.shape;
    this.weight = weight.data;
  }

  forward(index) {
    return Float64Array.from(this.weight.subarray(index * this.dim, (index + 1) * this.dim));
  }
}

// x + y, element by element (a residual connection, a position added to a token).
export function add(x, y) {
  return x.map((v, i) => v + y[i]);
}
