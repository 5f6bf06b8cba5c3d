// The council page (web/council.html) in headless Chromium against a real `forge serve`, on
// WebGPU (SwiftShader) and on the CPU fallback, asserted on what a person sees: greedy text and
// every step's expert weights equal native `forge council --format json` with the same experts,
// prompt, β and max tokens; the panel shows each expert's weight, own choice and hidden state;
// moving β during a run changes the weights from the next step; a bad β is refused; no console
// error and no failed request. Screenshots (wide and phone-sized) go to $FORGE_ARTIFACT_DIR.
//
// Exit status: 0 pass, 1 fail, 77 skip (no chromium or playwright-core, unless
// FORGE_TEST_REQUIRE_WEBGPU=1, when their absence is a failure).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { env, root, loadPlaywright, openBrowser, loadPage, startServer, waitForState,
         SKIP } from './harness.mjs';

const PROMPT = 'Fellow citizens of the Senate and House, ';
const TOKENS = 16;
const BETA = 2;
const COUNCIL = join(root, 'models/council');
const EXPERTS = ['1790-1860', '1861-1913', '1914-1960', '1961-2018'];
const config = JSON.parse(readFileSync(join(COUNCIL, 'config.json'), 'utf8'));
const artifacts = process.env.FORGE_ARTIFACT_DIR ?? join(env.cli, '..', 'artifacts');

setTimeout(() => {
  console.error('council_page_test: FAIL: the whole test took more than 20 minutes');
  process.exit(1);
}, 20 * 60_000).unref();

const chromium = loadPlaywright();
if (!chromium || !existsSync(env.chromium)) {
  const what = !chromium ? `playwright-core (${env.playwright})` : `Chromium (${env.chromium})`;
  const required = process.env.FORGE_TEST_REQUIRE_WEBGPU === '1';
  console.error(`council_page_test: ${required ? 'FAIL' : 'SKIP'}: ${what} is missing: run scripts/setup.sh`);
  process.exit(required ? 1 : SKIP);
}
assert.ok(existsSync(join(env.site, 'council.html')), `no council page in ${env.site}: run scripts/build_web.sh`);

/** Native `forge council --greedy --format json`: { steps: [...], summary }. */
function nativeCouncil(prompt, maxTokens, beta) {
  const args = ['council', '--backend', 'cpu', '--experts',
                ...EXPERTS.map((e) => join(COUNCIL, `${e}.compact`)), '--prompt', prompt,
                '--beta', String(beta), '--max-tokens', String(maxTokens), '--greedy',
                '--format', 'json'];
  return new Promise((resolve, reject) => {
    execFile(env.cli, args, { timeout: 300_000, maxBuffer: 1 << 24 }, (error, stdout, stderr) => {
      if (error) {
        reject(new Error(`forge council failed: ${stderr || error.message}`));
        return;
      }
      const lines = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
      resolve({ steps: lines.filter((l) => 'step' in l), summary: lines.at(-1) });
    });
  });
}

/** Every generated character the page shows: { id, text, weights }. */
function shownTokens(page) {
  return page.$$eval('#output .tok.gen', (spans) => spans.map((s) => ({
    id: Number(s.dataset.id), text: s.textContent, weights: JSON.parse(s.dataset.weights),
  })));
}

async function checkPanel(page, last) {
  const rows = await page.$$eval('#experts li:not(.sum)', (lis) => lis.map((li) => ({
    name: li.dataset.name, weight: Number(li.dataset.weight), entropy: Number(li.dataset.entropy),
    topId: Number(li.dataset.topId), agrees: li.classList.contains('agrees'),
    values: Number(li.querySelector('canvas').dataset.values),
    norm: Number(li.querySelector('canvas').dataset.norm),
    bar: li.querySelector('.bar').style.getPropertyValue('--p'),
  })));
  assert.deepEqual(rows.map((r) => r.name), EXPERTS, 'the panel does not list the four experts in order');
  const merged = Number(await page.getAttribute('#merged', 'data-id'));
  assert.equal(merged, last.id, 'the merged choice shown is not the last step\'s');
  for (const [i, r] of rows.entries()) {
    const want = last.experts[i];
    assert.ok(Math.abs(r.weight - want.weight) <= 1e-4, `${r.name}: weight ${r.weight} vs native ${want.weight}`);
    assert.ok(Math.abs(r.entropy - want.entropy) <= 1e-3, `${r.name}: entropy ${r.entropy} vs native ${want.entropy}`);
    assert.equal(r.topId, want.top_id, `${r.name}: its own top choice differs from native`);
    assert.equal(r.agrees, r.topId === merged, `${r.name}: agreement is marked wrongly`);
    assert.equal(Number(r.bar), r.weight, `${r.name}: the bar does not show the weight`);
    assert.equal(r.values, config.n_embd, `${r.name}: the hidden strip does not have ${config.n_embd} columns`);
    assert.ok(r.norm > 0 && Number.isFinite(r.norm), `${r.name}: hidden state norm ${r.norm}`);
  }
  assert.ok(new Set(rows.map((r) => r.norm.toFixed(3))).size === rows.length,
            'the experts\' hidden states should differ');
  const sum = rows.reduce((s, r) => s + r.weight, 0);
  assert.ok(Math.abs(sum - 1) <= 1e-5, `the weights sum to ${sum}`);
  const mergedValues = Number(await page.getAttribute('#merged-hidden', 'data-values'));
  assert.equal(mergedValues, config.n_embd, 'the merged strip is missing');
  // The strips are drawn: the canvas holds coloured pixels.
  const painted = await page.$eval('#experts li canvas', (c) => {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let alpha = 0;
    for (let i = 3; i < data.length; i += 4) alpha += data[i];
    return alpha;
  });
  assert.ok(painted > 0, 'the first hidden-state strip is blank');
}

/** β moved to 0 during a run: from some step on every weight is 1/4 (uniform); Stop ends it. */
async function checkLiveBeta(page) {
  await page.fill('#beta', String(BETA));
  await page.fill('#max-tokens', '200');
  await page.click('#generate');
  await page.waitForSelector('#output .tok.gen', { timeout: 120_000 });
  await page.focus('#beta-range');
  await page.keyboard.press('Home');  // the slider's minimum, 0, by keyboard
  assert.equal(await page.inputValue('#beta'), '0', 'the number box does not follow the slider');
  await page.waitForFunction(() => [...document.querySelectorAll('#output .tok.gen')].some(
    (s) => JSON.parse(s.dataset.weights).every((w) => Math.abs(w - 0.25) < 1e-6)), null, { timeout: 120_000 });
  await page.click('#stop');
  await waitForState(page, ['done'], 120_000);
  const shown = await shownTokens(page);
  assert.ok(shown.length < 200, `Stop left ${shown.length} of 200 tokens`);
  assert.ok(shown[0].weights.some((w) => Math.abs(w - 0.25) > 1e-3), `β = ${BETA} gave uniform weights at step 1`);
  assert.equal(await page.getAttribute('#stop-reason', 'data-reason'), 'callback');
  // The step under the slider's end ran at β = 0.
  await page.focus('#step');
  await page.keyboard.press('End');
  assert.equal((await page.textContent('#step-beta')).trim(), '0');
}

async function runCase(server, { webgpu, native }) {
  const name = webgpu ? 'WebGPU' : 'CPU fallback';
  const browser = await openBrowser(chromium, { webgpu, origin: server.url });
  try {
    const { page, problems } = browser;
    const shown = await loadPage(page, server.url, 'council.html');
    if (webgpu) {
      assert.equal(shown.backend, 'webgpu', `auto did not pick WebGPU: ${shown.backendText} (${shown.fallback})`);
      assert.match(shown.backendText, /WebGPU/);
      assert.match(shown.adapter, /\S/, 'no adapter name shown');
    } else {
      assert.equal(shown.backend, 'cpu');
      assert.match(shown.backendText, /CPU/);
      assert.match(shown.fallback ?? '', /WebGPU/, 'the page does not say why it fell back to the CPU');
    }
    assert.match(shown.model, new RegExp(`^4 × \\(${config.n_layer} layers × ${config.n_head} heads × ${config.n_embd}`));

    // Greedy at β = BETA, started from the keyboard.
    await page.fill('#prompt', PROMPT);
    await page.fill('#max-tokens', String(TOKENS));
    await page.fill('#beta', String(BETA));
    assert.equal(await page.inputValue('#beta-range'), String(BETA), 'the slider does not follow the number box');
    await page.check('#greedy');
    await page.focus('#prompt');
    await page.keyboard.press('Control+Enter');
    await waitForState(page, ['done'], 600_000);
    const tokens = await shownTokens(page);
    assert.deepEqual(tokens.map((t) => t.id), native.steps.map((s) => s.id), `${name}: greedy ids differ from native forge council`);
    assert.equal(tokens.map((t) => t.text).join(''), native.summary.text);
    for (const [i, t] of tokens.entries()) {
      const want = native.steps[i].experts.map((x) => x.weight);
      const worst = Math.max(...t.weights.map((w, k) => Math.abs(w - want[k])));
      assert.ok(worst <= 1e-4, `${name}: step ${i}: weights ${t.weights} vs native ${want} (off by ${worst})`);
    }
    await checkPanel(page, native.steps.at(-1));
    const tokensPerSecond = (await page.textContent('#tokens-per-second')).trim();
    assert.ok(Number(tokensPerSecond) > 0, `tokens/s shows ${tokensPerSecond}`);
    const firstToken = (await page.textContent('#first-token')).trim();

    mkdirSync(artifacts, { recursive: true });
    const stem = webgpu ? 'council' : 'council-cpu';
    await page.screenshot({ path: join(artifacts, `${stem}.png`), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: join(artifacts, `${stem}-phone.png`), fullPage: true });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the phone-sized page scrolls sideways by ${overflow} px`);
    await page.setViewportSize({ width: 1200, height: 900 });

    if (!webgpu) {
      await checkLiveBeta(page);
      // An over-long prompt is refused with the native message; a bad β as soon as it is typed.
      await page.fill('#prompt', 'x'.repeat(config.n_positions + 10));
      await page.click('#generate');
      await waitForState(page, ['error'], 60_000);
      assert.match(await page.textContent('#error'), new RegExp(`exceeds the experts' context of ${config.n_positions} tokens`));
      await page.fill('#beta', '-1');
      assert.match(await page.textContent('#error'), /β must be a number ≥ 0/);
      await page.fill('#beta', '3');
      assert.ok(await page.isHidden('#error'), 'a valid β did not clear the β error');
    }
    assert.deepEqual(problems, [], `${name}: the page logged errors or failed requests`);
    console.log(`council_page_test: ${name} ok: ${shown.adapter}; page load ${(shown.loadMs / 1000).toFixed(1)} s, ` +
                `${tokens.length} tokens, first token ${firstToken}, ${tokensPerSecond} tokens/s; ` +
                `screenshots ${join(artifacts, stem)}{,-phone}.png`);
  } finally {
    await browser.close();
  }
}

let server = null;
let failed = false;
const fail = (e) => {
  failed = true;
  console.error(`council_page_test: FAIL: ${e.stack ?? e.message}`);
  if (server) console.error(`forge serve said:\n${server.log()}`);
};
try {
  const native = await nativeCouncil(PROMPT, TOKENS, BETA);
  assert.equal(native.steps.length, TOKENS, 'native council stopped early: pick another prompt');
  console.log(`council_page_test: native forge council (CPU): ${native.summary.tokens_per_s.toFixed(1)} tokens/s`);
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
      console.error(`council_page_test: FAIL: forge serve exited with ${code} on SIGTERM`);
    }
  }
}
process.exit(failed ? 1 : 0);
