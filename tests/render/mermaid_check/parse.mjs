// Parse each Mermaid file named on the command line with the real Mermaid parser.
// Prints "ok FILE" or "FAIL FILE message" per file; exits 1 if any failed.
import { JSDOM } from 'jsdom';
import fs from 'fs';

const dom = new JSDOM('<!DOCTYPE html><body></body>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import('mermaid');
mermaid.initialize({ startOnLoad: false });

let failed = 0;
for (const file of process.argv.slice(2)) {
  try {
    await mermaid.parse(fs.readFileSync(file, 'utf8'));
    console.log(`ok ${file}`);
  } catch (err) {
    failed += 1;
    console.log(`FAIL ${file} ${String(err?.message ?? err).replace(/\n/g, ' ')}`);
  }
}
process.exit(failed ? 1 : 0);
