// Python twin: src/transformer_course/poetics.py (VerseRules: the tokens that keep a poem in its form).
// The sound tables come from the export (tools/poet_web.py): per token, Han or not, its rhyme class, and
// whether it may open the rhyme of a 4- or an 8-clause poem, as VerseRules computes them in Python.

export const STOPS = "，。？！；";
export const SHAPES = { 五绝: [4, 5], 七绝: [4, 7], 五律: [8, 5], 七律: [8, 7] };  // form -> [clauses, characters]

// vocab: {itos, stoi, eot, verse: {han, rhyme, opens4, opens8}} (each table a string, one character per token)
export class VerseRules {
  constructor(vocab, form, { acrostic = "", rhyme = true, noRepeat = true } = {}) {
    if (!(form in SHAPES)) throw new Error(`form must be one of ${Object.keys(SHAPES)}, got ${form}`);
    [this.nClauses, this.n] = SHAPES[form];
    Object.assign(this, { form, rhyme, noRepeat, stoi: vocab.stoi, eot: vocab.eot });
    this.chars = vocab.itos.map((s) => ([...s].length === 1 ? s : ""));  // "" for special tokens
    this.han = vocab.verse.han;
    this.rhymeOf = vocab.verse.rhyme;  // "-": no known class
    this.opens = this.nClauses === 4 ? vocab.verse.opens4 : vocab.verse.opens8;
    this.acrostic = [...acrostic].map((c) => this.stoi[c]);
    if (this.acrostic.length > this.nClauses || this.acrostic.some((t) => this.han[t] !== "1")) {
      throw new Error(`acrostic must be at most ${this.nClauses} Han characters of the vocabulary, got ${acrostic}`);
    }
  }

  only(token) {
    const mask = new Uint8Array(this.chars.length);
    mask[token] = 1;
    return mask;
  }

  // The tokens that may follow row (token ids so far): 1 where allowed, (V,).
  allowed(row) {
    const text = row.map((i) => this.chars[i]).join("");
    const clauses = text.replaceAll("\n", "").split(new RegExp(`[${STOPS}]`)).map((c) => [...c]);
    const current = clauses.pop(), done = clauses, k = done.length;  // k: clauses complete
    if (done.some((c) => c.length !== this.n) || current.length > this.n || k > this.nClauses) {
      throw new Error(`tokens must be the start of a ${this.form}, got ${text}`);
    }
    if (k === this.nClauses) return this.only(this.eot);
    if (current.length === this.n) return this.only(this.stoi[k % 2 === 0 ? "，" : "。"]);
    if (!current.length && k % 2 === 0 && k > 0 && !text.endsWith("\n")) return this.only(this.stoi["\n"]);
    if (!current.length && k < this.acrostic.length) return this.only(this.acrostic[k]);
    const mask = Uint8Array.from(this.han, (c) => c === "1");
    if (this.rhyme && k % 2 === 1 && current.length === this.n - 1) {  // the rhyme character
      if (k === 1) {
        mask.forEach((_, i) => { if (this.opens[i] !== "1") mask[i] = 0; });
      } else {
        const cls = this.rhymeOf[this.stoi[done[1].at(-1)]];
        if (cls === "-") throw new Error(`the 2nd clause must end in a character of known rhyme class`);
        mask.forEach((_, i) => { if (this.rhymeOf[i] !== cls) mask[i] = 0; });
        done.filter((_, i) => i % 2 === 1).forEach((c) => { mask[this.stoi[c.at(-1)]] = 0; });
      }
    }
    if (this.noRepeat && current.length) mask[this.stoi[current.at(-1)]] = 0;
    return mask;
  }
}
