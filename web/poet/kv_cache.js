// Python twin: src/transformer_course/kv_cache.py (KVCache: pos, layer(i).update(k, v), advance(n)).
// One key and one value vector (C,) per layer and position, all heads side by side (head h owns
// features h·d_head .. (h+1)·d_head), as the fused projection makes them.

export class KVCache {
  constructor(nLayers) {
    this.pos = 0;  // positions 0 .. pos-1 have been written, in every layer
    this.k = Array.from({ length: nLayers }, () => []);
    this.v = Array.from({ length: nLayers }, () => []);
  }

  // Layer i's part: update(k, v) stores the new positions pos .. pos+T-1 and returns every key and value so far.
  layer(i) {
    return {
      update: (k, v) => {
        this.k[i].length = this.v[i].length = this.pos;  // what a rewound cache held beyond pos is overwritten
        this.k[i].push(...k);
        this.v[i].push(...v);
        return [this.k[i], this.v[i]];
      },
    };
  }

  // After every layer has stored them: the T new positions are part of the past.
  advance(n) {
    this.pos += n;
  }
}
