// Builds the web UI into crates/tiny-harness/ui/ (docs/ui.md): one esbuild bundle of
// src/app.ts with the A2UI renderer packages, beside index.html and app.css.
// `node build.mjs --out DIR` writes elsewhere (`cargo xtask ui --check` compares).
import * as esbuild from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const at = process.argv.indexOf('--out');
const out = at > 0 ? resolve(process.argv[at + 1]) : join(here, '..', 'crates', 'tiny-harness', 'ui');
mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: [join(here, 'src', 'app.ts')],
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  // The packages' license headers, once each, at the end of the bundle.
  legalComments: 'eof',
  outfile: join(out, 'app.js'),
  logLevel: 'warning',
});
for (const file of ['index.html', 'app.css']) {
  copyFileSync(join(here, 'src', file), join(out, file));
}
console.log(`built the UI into ${out}`);
