// The "Watch it think" page in headless Chromium against a real `forge serve`, asserted on what
// a person sees: greedy tokens identical to native `forge generate` (also with --stop and
// --sliding-window), attention rows that sum to 1, a sorted shortlist of probabilities, the
// backend named (WebGPU via SwiftShader, then the CPU fallback with its reason), a clear error
// for an over-long prompt, no console error and no failed request. Writes screenshots to
// $FORGE_ARTIFACT_DIR.
//
// Exit status: 0 pass, 1 fail, 77 skip (no chromium or playwright-core, unless
// FORGE_TEST_REQUIRE_WEBGPU=1, when their absence is a failure).
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { env, loadPlaywright, nativeGenerate, openBrowser, loadPage, generateOnPage,
         startServer, waitForState, SKIP } from './harness.mjs';

const PROMPT = 'Mr. Speaker, the state of the Union ';
const TOKENS = 40;
const config = JSON.parse(readFileSync(join(env.model, 'config.json'), 'utf8'));
const artifacts = process.env.FORGE_ARTIFACT_DIR ?? join(env.cli, '..', 'artifacts');

setTimeout(() => {
  console.error('page_test: FAIL: the whole test took more than 15 minutes');
  process.exit(1);
}, 15 * 60_000).unref();

const chromium = loadPlaywright();
if (!chromium || !existsSync(env.chromium)) {
  const what = !chromium ? `playwright-core (${env.playwright})` : `Chromium (${env.chromium})`;
  const required = process.env.FORGE_TEST_REQUIRE_WEBGPU === '1';
  console.error(`page_test: ${required ? 'FAIL' : 'SKIP'}: ${what} is missing: run scripts/setup.sh`);
  process.exit(required ? 1 : SKIP);
}
assert.ok(existsSync(join(env.site, 'index.html')), `no site in ${env.site}: run scripts/build_web.sh`);

async function checkPanels(page, promptLength, lastId) {
  // The shortlist of the newest step: best first, probabilities in (0, 1], greedy took the top.
  const shortlist = await page.$$eval('#shortlist li', (rows) => rows.map((r) => ({
    id: Number(r.dataset.id), p: Number(r.dataset.probability), chosen: r.classList.contains('chosen'),
  })));
  assert.ok(shortlist.length >= 2, `shortlist has ${shortlist.length} rows`);
  for (const [i, row] of shortlist.entries()) {
    assert.ok(row.p > 0 && row.p <= 1, `shortlist probability ${row.p} is outside (0, 1]`);
    if (i > 0) assert.ok(row.p <= shortlist[i - 1].p, `shortlist is not sorted at row ${i}`);
  }
  assert.equal(shortlist[0].id, lastId, 'greedy did not take the top of the shortlist');
  assert.ok(shortlist[0].chosen, 'the chosen token is not marked in the shortlist');
  assert.ok(shortlist.reduce((s, r) => s + r.p, 0) <= 1 + 1e-5, 'shortlist probabilities sum past 1');

  // Attention of the newest token, for every layer and head the selects offer.
  const layers = await page.$$eval('#layer option', (o) => o.map((x) => x.value));
  const heads = await page.$$eval('#head option', (o) => o.map((x) => x.value));
  assert.ok(layers.length > 0 && heads.length > 0, 'no layer or head to pick');
  for (const layer of layers) {
    for (const head of heads) {
      await page.selectOption('#layer', layer);
      await page.selectOption('#head', head);
      const strip = await page.$eval('#attention', (el) => ({
        layer: el.dataset.layer, head: el.dataset.head,
        weights: [...el.querySelectorAll('.cell')].map((c) => Number(c.dataset.weight)),
      }));
      assert.deepEqual([strip.layer, strip.head], [layer, head], 'the strip did not follow the pickers');
      assert.equal(strip.weights.length, promptLength + TOKENS - 1,
                   'the newest token should attend over the prompt and every earlier generated token');
      const sum = strip.weights.reduce((s, w) => s + w, 0);
      assert.ok(Math.abs(sum - 1) <= 1e-3, `attention row of layer ${layer} head ${head} sums to ${sum}`);
      assert.ok(strip.weights.every((w) => w >= 0 && w <= 1), 'attention weight outside [0, 1]');
    }
  }
  // Step 1 (keyboard on the slider) looked over the prompt alone.
  await page.focus('#step');
  await page.keyboard.press('Home');
  assert.equal(await page.getAttribute('#attention', 'data-length'), String(promptLength));
  await page.keyboard.press('End');
  assert.equal(await page.getAttribute('#attention', 'data-length'), String(promptLength + TOKENS - 1));
}

// Issue 14 section 6: what a new user hit on this page, one assertion each.

/** Greedy disables the temperature and says why; unticking gives it back. */
async function checkGreedyHint(page) {
  assert.ok(await page.isChecked('#greedy'));
  assert.ok(await page.isDisabled('#temperature'), 'temperature stays editable with Greedy ticked');
  assert.match(await page.textContent('#temperature-hint'), /ignored/);
  assert.ok(await page.isVisible('#temperature-hint'), 'no hint that greedy ignores the temperature');
  await page.uncheck('#greedy');
  assert.ok(!(await page.isDisabled('#temperature')) && !(await page.isVisible('#temperature-hint')));
  await page.check('#greedy');
}

/** No probability reads "0.0%"; the exact value shows on hover and on keyboard focus. */
async function checkSmallProbabilities(page) {
  const read = () => page.$$eval('#shortlist li', (lis) => lis.map((li) => ({
    p: Number(li.dataset.probability), shown: li.querySelector('.p').textContent,
    exact: li.querySelector('.p').dataset.exact, tab: li.tabIndex,
  })));
  // Back from the newest step (the slider) to one whose shortlist holds a probability < 0.1%.
  await page.focus('#step');
  let rows = await read();
  for (let back = 0; back < TOKENS && !rows.some((r) => r.p < 0.001); ++back) {
    await page.keyboard.press('ArrowLeft');
    rows = await read();
  }
  assert.ok(rows.some((r) => r.p < 0.001), 'no small probability in any shortlist to check');
  for (const r of rows) {
    assert.notEqual(r.shown, '0.0%', `probability ${r.p} reads 0.0%`);
    const value = Number(r.shown.replace('%', '')) / 100;
    assert.ok(Math.abs(value - r.p) <= 0.051 * r.p + 5e-4 * (r.p >= 0.001), `${r.shown} is not ${r.p}`);
    assert.ok(Math.abs(Number(r.exact.replace('p = ', '')) - r.p) <= 1e-5 * r.p, `exact ${r.exact} is not ${r.p}`);
    assert.equal(r.tab, 0, 'a shortlist row cannot take keyboard focus');
  }
  const after = (sel) => page.$eval(sel, (el) => getComputedStyle(el, '::after').content);
  const last = '#shortlist li:last-child';
  await page.hover(last);
  assert.match(await after(`${last} .p`), /p = /, 'hovering a row does not show its exact probability');
  await page.mouse.move(0, 0);
  await page.focus(last);
  assert.match(await after(`${last} .p`), /p = /, 'focusing a row does not show its exact probability');
}

/** While tokens stream with the slider held back, the label's total follows; Prefill is filled. */
async function checkLiveLabels(page) {
  await page.fill('#max-tokens', '200');
  await page.click('#generate');
  await page.waitForSelector('#output .tok.gen', { timeout: 120_000 });
  const prefill = await page.textContent('#prefill');
  assert.match(prefill, /ms$/, `Prefill shows "${prefill}" once the first token is out`);
  // Held back means behind the newest step: at one step, Home is the newest (SwiftShader's pace).
  await page.waitForFunction(() => document.querySelectorAll('#output .tok.gen').length >= 2 ||
                                   document.querySelector('#status').dataset.state === 'done');
  await page.focus('#step');
  await page.keyboard.press('Home');
  await page.waitForFunction(() => document.querySelectorAll('#output .tok.gen').length >= 4 ||
                                   document.querySelector('#status').dataset.state === 'done');
  const seen = await page.evaluate(() => ({
    label: document.querySelector('#step-label').textContent,
    count: document.querySelectorAll('#output .tok.gen').length,
  }));
  assert.ok(seen.label.startsWith(`1 of ${seen.count}:`), `label "${seen.label}" with ${seen.count} tokens`);
  await page.click('#stop');
  await waitForState(page, ['done'], 120_000);
}

/** Stop (the button, or Esc) right after Generate (the prefill, seconds long on SwiftShader)
 *  ends the run within 2 s. */
async function checkStopDuringPrefill(page, webgpu, how = 'click') {
  await page.fill('#max-tokens', '200');
  await page.click('#generate');
  const clicked = performance.now();
  if (how === 'Esc') await page.keyboard.press('Escape');
  else await page.click('#stop');
  await waitForState(page, ['done'], 2_000);
  const ms = performance.now() - clicked;
  const count = await page.$$eval('#output .tok.gen', (spans) => spans.length);
  if (webgpu) assert.equal(count, 0, `a stop during the prefill still showed ${count} tokens`);
  assert.ok(count < 200);
  assert.equal(await page.getAttribute('#stop-reason', 'data-reason'), 'callback');
  assert.ok(!(await page.isDisabled('#generate')), 'Generate is not offered again after Stop');
  return ms;
}

/** A failed run (a blank max-tokens field, a character outside the vocabulary) leaves no old output. */
async function checkFailedRunClears(page) {
  assert.ok(await page.$$eval('#output .tok', (s) => s.length) > 0, 'nothing on screen to clear');
  const cleared = async (what) => {
    await waitForState(page, ['error'], 60_000);
    assert.equal(await page.$$eval('#output .tok', (s) => s.length), 0, `${what}: old output stays`);
    assert.equal(await page.$$eval('#shortlist li', (s) => s.length), 0, `${what}: old shortlist stays`);
    for (const id of ['#prefill', '#first-token', '#tokens-per-second', '#token-count', '#stop-reason']) {
      assert.equal((await page.textContent(id)).trim(), '–', `${what}: ${id} keeps the old figure`);
    }
    assert.equal((await page.textContent('#step-label')).trim(), '–');
  };
  await page.fill('#max-tokens', '');
  await page.click('#generate');
  await cleared('blank max tokens');
  assert.match(await page.textContent('#error'), /Max tokens/);
  await page.fill('#max-tokens', '8');
  await page.click('#generate');
  await waitForState(page, ['done'], 300_000);
  const prompt = await page.inputValue('#prompt');
  await page.fill('#prompt', '\u4e16\u754c');  // not in the char vocabulary
  await page.click('#generate');
  await cleared('out-of-vocabulary prompt');
  await page.fill('#prompt', prompt);
}

/** Past the context the window slides as `forge generate --sliding-window` does: the same ids. */
async function checkSlidingWindow(page) {
  const total = config.n_positions + 40;
  const native = await nativeGenerate(PROMPT, total, 'cpu', ['--sliding-window']);
  assert.equal(native.ids.length, total, 'native sliding generation stopped early');
  const out = await generateOnPage(page, PROMPT, total);
  assert.deepEqual(out.ids, native.ids, 'sliding-window ids differ from native forge generate --sliding-window');
  assert.equal(await page.getAttribute('#stop-reason', 'data-reason'), 'max_tokens');
  const cells = await page.$$eval('#attention .cell', (cs) => cs.map((c) => Number(c.dataset.pos)));
  assert.ok(cells.length <= config.n_positions && cells[0] > 0, 'the attention strip did not slide');
  assert.equal(cells.at(-1), native.prompt_ids.length + total - 2, 'the strip does not end at the newest position');
}

/** "Stop at" ends the run where its text appears, as `forge generate --stop` does: the same ids,
 *  the text before the stop string shown, the stop string struck through. */
async function checkStopString(page, reference) {
  const stop = reference.text.slice(12, 15);
  assert.ok(!/[\n\\]/.test(stop), `pick another stop string than ${JSON.stringify(stop)}: a text field holds no new line`);
  const native = await nativeGenerate(PROMPT, TOKENS, 'cpu', ['--stop', stop]);
  assert.equal(native.stop_reason, 'stop_string');
  await page.fill('#stop-at', stop);
  const out = await generateOnPage(page, PROMPT, TOKENS);
  assert.deepEqual(out.ids, native.ids, 'ids differ from native forge generate --stop');
  assert.equal(await page.getAttribute('#stop-reason', 'data-reason'), 'stop_string');
  assert.equal((await page.textContent('#stop-reason')).trim(), 'stop text');
  const shown = await page.$$eval('#output .tok.gen:not(.cut)', (spans) => spans.map((s) => s.textContent).join(''));
  assert.equal(shown, native.text, 'the text not struck through is not native forge generate --stop\'s');
  const cut = await page.$$eval('#output .cut', (spans) => spans.map((s) => s.textContent).join(''));
  assert.ok(cut.startsWith(stop), `struck through: "${cut}", not the stop string "${stop}"`);
  assert.equal(await page.$eval('#output .cut', (el) => getComputedStyle(el).textDecorationLine), 'line-through');
}

/** A start-up error (a checkpoint the model lacks) leaves no progress bar or "…" placeholders. */
async function checkStartupError(browser, url) {
  const page = await browser.page.context().newPage();
  const seen = [];
  page.on('response', (r) => { if (r.status() >= 400) seen.push(r.url()); });
  try {
    // The documented ?checkpoint=model.compact loads the shipped model (once a 404)...
    await page.goto(`${url}think.html?backend=cpu&checkpoint=model.compact`);
    await waitForState(page, ['ready'], 60_000);
    assert.match(await page.textContent('#model-info'), /layers/);
    // ... and a checkpoint the model lacks says how to make one.
    await page.goto(`${url}?backend=cpu&checkpoint=model.safetensors`);
    await waitForState(page, ['error'], 60_000);
    assert.match(await page.textContent('#error'), /has no model\.safetensors.*forge convert/s);
    assert.ok(!(await page.isVisible('#load-progress')), 'the empty progress bar stays after the error');
    const facts = await page.textContent('#device');
    assert.ok(!facts.includes('…'), `placeholders stay after the error: ${facts}`);
    assert.deepEqual(seen.map((u) => new URL(u).pathname), ['/model/model.safetensors'],
                     'only the missing checkpoint failed');
  } finally {
    await page.close();
  }
}

async function runCase(server, { webgpu, native }) {
  const name = webgpu ? 'WebGPU' : 'CPU fallback';
  const browser = await openBrowser(chromium, { webgpu, origin: server.url });
  try {
    const { page, problems } = browser;
    const shown = await loadPage(page, server.url);
    if (webgpu) {
      assert.equal(shown.backend, 'webgpu', `auto did not pick WebGPU: ${shown.backendText} (${shown.fallback})`);
      assert.match(shown.backendText, /WebGPU/);
      assert.match(shown.adapter, /\S/, 'no adapter name shown');
    } else {
      assert.equal(shown.backend, 'cpu');
      assert.match(shown.backendText, /CPU/);
      assert.match(shown.fallback ?? '', /WebGPU/, 'the page does not say why it fell back to the CPU');
    }
    assert.match(shown.model, new RegExp(`${config.n_layer} layers × ${config.n_head} heads × ${config.n_embd}`));

    const out = await generateOnPage(page, PROMPT, TOKENS);
    assert.deepEqual(out.promptIds, native.prompt_ids, 'the page tokenized the prompt differently');
    assert.deepEqual(out.ids, native.ids, `${name}: greedy ids differ from native forge generate`);
    assert.equal(out.text, native.text);
    await checkPanels(page, native.prompt_ids.length, native.ids.at(-1));
    assert.match(out.prefill, /ms$/);
    assert.ok(Number(out.tokensPerSecond) > 0, `tokens/s shows ${out.tokensPerSecond}`);

    mkdirSync(artifacts, { recursive: true });
    const shot = join(artifacts, webgpu ? 'page.png' : 'page-cpu.png');
    await page.screenshot({ path: shot, fullPage: true });
    // On the 40-token run: a Stop on SwiftShader may leave a run of one or two confident steps.
    await checkSmallProbabilities(page);
    await checkStopString(page, native);
    await page.screenshot({ path: join(artifacts, webgpu ? 'page-stop.png' : 'page-stop-cpu.png'), fullPage: true });
    await page.fill('#stop-at', '');

    // Tokens stream: Stop, clicked once the first token shows, ends a long generation early.
    // (200 tokens fit the context after the prompt, so only Stop can end it early.)
    await page.fill('#max-tokens', '200');
    await page.click('#generate');
    await page.waitForSelector('#output .tok.gen', { timeout: 60_000 });
    await page.click('#stop');
    await waitForState(page, ['done'], 120_000);
    const streamed = await page.$$eval('#output .tok.gen', (spans) => spans.length);
    assert.ok(streamed >= 1 && streamed < 200, `Stop left ${streamed} of 200 tokens`);
    assert.equal(await page.getAttribute('#stop-reason', 'data-reason'), 'callback');
    assert.equal((await page.textContent('#stop-reason')).trim(), 'stopped');

    await checkGreedyHint(page);
    const stopMs = await checkStopDuringPrefill(page, webgpu);
    const escMs = await checkStopDuringPrefill(page, webgpu, 'Esc');
    await checkLiveLabels(page);
    await checkFailedRunClears(page);
    if (!webgpu) {
      await checkSlidingWindow(page);
      await checkStartupError(browser, server.url);
    }

    if (!webgpu) {
      // An over-long prompt is refused with the native message, shown on the page.
      await page.fill('#prompt', 'x'.repeat(config.n_positions + 44));
      await page.click('#generate');
      await waitForState(page, ['error'], 60_000);
      assert.match(await page.textContent('#error'), new RegExp(`exceeds the model's context of ${config.n_positions} tokens`));
    }
    assert.deepEqual(problems, [], `${name}: the page logged errors or failed requests`);
    console.log(`page_test: ${name} ok: ${shown.adapter}; ${out.ids.length} tokens, prefill ${out.prefill}, ` +
                `first token ${out.firstToken}, ${out.tokensPerSecond} tokens/s; Stop after Generate ` +
                `ended the run in ${stopMs.toFixed(0)} ms, Esc in ${escMs.toFixed(0)} ms; screenshot ${shot}`);
  } finally {
    await browser.close();
  }
}

let server = null;
let failed = false;
const fail = (e) => {
  failed = true;
  console.error(`page_test: FAIL: ${e.stack ?? e.message}`);
  if (server) console.error(`forge serve said:\n${server.log()}`);
};
try {
  const native = await nativeGenerate(PROMPT, TOKENS);
  assert.equal(native.ids.length, TOKENS, 'native generation stopped early: pick another prompt');
  server = await startServer();
  // Each case reports on its own, so a WebGPU failure still shows how the CPU fallback fared.
  for (const webgpu of [true, false]) await runCase(server, { webgpu, native }).catch(fail);
} catch (e) {
  fail(e);
} finally {
  if (server) {
    const code = await server.stop();
    if (code !== 0) {
      failed = true;
      console.error(`page_test: FAIL: forge serve exited with ${code} on SIGTERM`);
    }
  }
}
process.exit(failed ? 1 : 0);
