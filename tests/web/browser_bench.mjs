// Time to first token and decode tokens/s of the shipped model: the page in headless Chromium
// (SwiftShader WebGPU and the CPU fallback) against native `forge generate` (CPU and WebGPU,
// lavapipe here), same prompt, same greedy tokens, same machine, one run.
//   node tests/web/browser_bench.mjs [tokens] [repeats]
// Env as in page_test.mjs (FORGE_CLI, FORGE_SITE_DIR, FORGE_MODEL_DIR). Browser figures are
// what the page shows: the first token's time since generate() began, and its tokens/s.
import { env, loadPlaywright, nativeGenerate, openBrowser, loadPage, generateOnPage,
         startServer } from './harness.mjs';

const PROMPT = 'Mr. Speaker, the state of the Union ';
const tokens = Number(process.argv[2] ?? 64);
const repeats = Number(process.argv[3] ?? 3);

const chromium = loadPlaywright();
if (!chromium) {
  console.error(`browser_bench: playwright-core is missing (${env.playwright}): run scripts/setup.sh`);
  process.exit(1);
}

const rows = [];
const best = (runs, key, lower) => runs.map((r) => r[key]).reduce((a, b) => (lower ? Math.min(a, b) : Math.max(a, b)));

for (const backend of ['cpu', 'webgpu']) {
  try {
    const runs = [];
    for (let i = 0; i < repeats; ++i) {
      const r = await nativeGenerate(PROMPT, tokens, backend);
      runs.push({ firstMs: r.prefill_ms, tps: r.tokens_per_s, ids: r.ids, name: r.backend });
    }
    rows.push({ what: `native ${backend} (${runs[0].name})`, cold: runs[0].firstMs,
                firstMs: best(runs, 'firstMs', true), tps: best(runs, 'tps', false), ids: runs[0].ids });
  } catch (e) {
    rows.push({ what: `native ${backend}`, error: e.message });
  }
}

const server = await startServer();
try {
  for (const webgpu of [true, false]) {
    const browser = await openBrowser(chromium, { webgpu, origin: server.url });
    try {
      const shown = await loadPage(browser.page, server.url);
      const runs = [];
      for (let i = 0; i < repeats; ++i) {
        const out = await generateOnPage(browser.page, PROMPT, tokens);
        runs.push({ firstMs: parseFloat(out.firstToken), tps: parseFloat(out.tokensPerSecond), ids: out.ids });
      }
      rows.push({ what: `Chromium ${shown.backend} (${shown.adapter}), page load ${shown.loadMs.toFixed(0)} ms`,
                  cold: runs[0].firstMs, firstMs: best(runs, 'firstMs', true), tps: best(runs, 'tps', false),
                  ids: runs[0].ids });
    } catch (e) {
      rows.push({ what: `Chromium ${webgpu ? 'with' : 'without'} --enable-unsafe-webgpu`, error: e.message });
    } finally {
      await browser.close();
    }
  }
} finally {
  await server.stop();
}

const reference = JSON.stringify(rows.find((r) => r.ids)?.ids);
console.log(`browser_bench: ${tokens} greedy tokens after a ${PROMPT.length}-character prompt, best of ${repeats}`);
console.log('| run | first token, first run | first token, best | decode tokens/s, best | same ids as the first row |');
console.log('| --- | --- | --- | --- | --- |');
for (const r of rows) {
  if (r.error) {
    console.log(`| ${r.what} | failed: ${r.error.split('\n')[0]} | | | |`);
    continue;
  }
  console.log(`| ${r.what} | ${r.cold.toFixed(1)} ms | ${r.firstMs.toFixed(1)} ms | ${r.tps.toFixed(1)} | ` +
              `${JSON.stringify(r.ids) === reference ? 'yes' : 'NO'} |`);
}
