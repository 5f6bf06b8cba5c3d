// The Surprise page in headless Chromium against a real `forge serve`, on WebGPU (SwiftShader)
// and on the CPU fallback, asserted on what a person sees: the bits and top-K candidates of a
// shipped paragraph equal native `forge surprise --format json` (≤ 1e-4 bits), hovering or
// focusing a character shows its candidates, rescoring a selection equals native on the
// substring, the reveal flickers and settles, "Read it again" replays it, reduced motion goes
// straight to the final frame, no console error, no failed or off-site request. Screenshots
// (wide and phone-sized) go to $FORGE_ARTIFACT_DIR; the load-to-final-frame times are printed.
//
// Exit status: 0 pass, 1 fail, 77 skip (no chromium or playwright-core, unless
// FORGE_TEST_REQUIRE_WEBGPU=1).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { env, loadPlaywright, openBrowser, startServer, waitForState, SKIP } from './harness.mjs';

const TOP_K = 8;
const BITS_TOLERANCE = 1e-4;
const artifacts = process.env.FORGE_ARTIFACT_DIR ?? join(env.cli, '..', 'artifacts');

setTimeout(() => {
  console.error('surprise_test: FAIL: the whole test took more than 15 minutes');
  process.exit(1);
}, 15 * 60_000).unref();

const chromium = loadPlaywright();
if (!chromium || !existsSync(env.chromium)) {
  const required = process.env.FORGE_TEST_REQUIRE_WEBGPU === '1';
  console.error(`surprise_test: ${required ? 'FAIL' : 'SKIP'}: Chromium or playwright-core is missing`);
  process.exit(required ? 1 : SKIP);
}

/** Native `forge surprise --format json` on the CPU. */
function nativeSurprise(text) {
  const args = ['surprise', '--backend', 'cpu', '--model', env.model, '--text', text,
                '--top', String(TOP_K), '--format', 'json'];
  return new Promise((resolve, reject) => {
    execFile(env.cli, args, { timeout: 300_000, maxBuffer: 1 << 26 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`forge surprise failed: ${stderr || error.message}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

/** The heat map's scored characters as the page shows them. */
function shownBits(page, selector = '#heat .ch[data-bits]') {
  return page.$$eval(selector, (spans) => spans.map((s) => ({
    pos: Number(s.dataset.pos), text: s.textContent, bits: Number(s.dataset.bits),
  })));
}

function assertBits(shown, native, what) {
  assert.equal(shown.length, native.positions.length, `${what}: ${shown.length} scored characters, native ${native.positions.length}`);
  for (const [i, p] of native.positions.entries()) {
    assert.equal(shown[i].text, p.text, `${what}: character ${i + 1} differs`);
    assert.ok(Math.abs(shown[i].bits - p.bits) <= BITS_TOLERANCE,
              `${what}: position ${i + 1} (“${p.text}”) shows ${shown[i].bits} bits, native ${p.bits}`);
  }
}

async function candidatesShown(page) {
  return page.$$eval('#candidates li[data-id]', (rows) => rows.map((r) => ({
    id: Number(r.dataset.id), probability: Number(r.dataset.probability),
  })));
}

async function runCase(server, { webgpu }) {
  const name = webgpu ? 'WebGPU' : 'CPU fallback';
  const browser = await openBrowser(chromium, { webgpu, origin: server.url });
  const times = {};
  try {
    const { page, problems } = browser;
    // The reveal as it plays: characters flicker, then all lock.
    await page.goto(`${server.url}surprise.html`);
    await waitForState(page, ['revealing', 'done'], 300_000);
    assert.equal(await page.getAttribute('#status', 'data-state'), 'revealing', 'the reveal did not play');
    assert.ok(await page.$$eval('#heat .ch.flicker', (s) => s.length) > 0, 'nothing flickers during the reveal');
    await waitForState(page, ['done'], 60_000);
    assert.equal(await page.$$eval('#heat .ch:not(.locked)', (s) => s.length), 0, 'characters left unlocked');
    times.reveal = Number(await page.getAttribute('#status', 'data-final-ms'));
    assert.ok(Number(await page.getAttribute('#status', 'data-reveal-ms')) > 0);
    assert.equal(await page.getAttribute('#backend', 'data-backend'), webgpu ? 'webgpu' : 'cpu');
    if (!webgpu) assert.match(await page.textContent('#fallback'), /WebGPU/, 'no reason for the CPU fallback');
    assert.match(await page.textContent('.note'), /replays that one pass/);

    // Every position's bits and (hovering each) its candidates equal native forge surprise.
    const text = await page.inputValue('#text');
    const native = await nativeSurprise(text);
    assertBits(await shownBits(page), native, name);
    for (const [i, p] of native.positions.entries()) {
      await page.hover(`#heat .ch[data-pos="${i + 1}"]`);
      const shown = await candidatesShown(page);
      assert.deepEqual(shown.map((c) => c.id), p.top.map((c) => c.id), `${name}: candidates at ${i + 1}`);
      for (const [j, c] of p.top.entries()) {
        assert.ok(Math.abs(shown[j].probability - c.probability) <= 1e-5, `${name}: p of candidate ${j} at ${i + 1}`);
      }
    }
    mkdirSync(artifacts, { recursive: true });
    const tag = webgpu ? '' : '-cpu';
    await page.hover('#heat .ch[data-pos="12"]');
    await page.screenshot({ path: join(artifacts, `surprise${tag}.png`), fullPage: true });

    // The keyboard: one tab stop, arrows move and show the candidates, Shift+arrows select,
    // Enter rescores the selection with only the selection as context.
    await page.focus('#heat .ch[data-pos="0"]');
    for (let i = 0; i < 4; ++i) await page.keyboard.press('ArrowRight');
    assert.equal(await page.getAttribute('#detail-panel', 'data-pos'), '4', 'focus did not move the detail');
    assert.deepEqual((await candidatesShown(page)).map((c) => c.id), native.positions[3].top.map((c) => c.id));
    for (let i = 0; i < 14; ++i) await page.keyboard.press('Shift+ArrowRight');
    assert.ok(!(await page.isDisabled('#rescore')), 'a keyboard selection does not offer rescoring');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#rescored-panel:not([hidden])');
    await waitForState(page, ['done'], 120_000);
    const chars = [native.first, ...native.positions].map((p) => p.text);
    const phrase = chars.slice(4, 19).join('');
    const alone = await nativeSurprise(phrase);
    const rescored = await shownBits(page, '#rescored .ch[data-bits]');
    assertBits(rescored, alone, `${name} rescoring “${phrase}”`);
    const changed = rescored.filter((r, i) => Math.abs(r.bits - native.positions[4 + i].bits) > 1e-3);
    assert.ok(changed.length > 0, 'rescoring alone changed no number');

    // The mouse: a selection made by dragging is rescored too.
    await page.evaluate(() => {
      const range = document.createRange();
      range.setStart(document.querySelector('#heat .ch[data-pos="30"]').firstChild, 0);
      range.setEnd(document.querySelector('#heat .ch[data-pos="41"]').firstChild, 1);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
    });
    await page.click('#rescore');
    await page.waitForFunction(() => document.querySelector('#rescored-panel').dataset.from === '30');
    await waitForState(page, ['done'], 120_000);
    assertBits(await shownBits(page, '#rescored .ch[data-bits]'), await nativeSurprise(chars.slice(30, 42).join('')),
               `${name} rescoring a mouse selection`);

    // Read it again replays the reveal.
    await page.click('#replay');
    assert.equal(await page.getAttribute('#status', 'data-state'), 'revealing');
    await waitForState(page, ['done'], 60_000);

    // Another shipped paragraph, scored as native scores it.
    await page.selectOption('#sample', '2');
    await waitForState(page, ['revealing'], 300_000);
    await waitForState(page, ['done'], 300_000);
    assertBits(await shownBits(page), await nativeSurprise(await page.inputValue('#text')), `${name} paragraph 3`);

    // Reduced motion: the final frame at once, no flicker.
    await page.emulateMedia({ reducedMotion: 'reduce' });
    await page.reload();
    await waitForState(page, ['done'], 300_000);
    assert.equal(await page.getAttribute('#status', 'data-reveal-ms'), '0', 'reduced motion still animated');
    assert.equal(await page.$$eval('#heat .ch.flicker', (s) => s.length), 0);
    times.reducedMotion = Number(await page.getAttribute('#status', 'data-final-ms'));
    assertBits(await shownBits(page), native, `${name} reduced motion`);

    // A phone.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.hover('#heat .ch[data-pos="12"]');
    await page.screenshot({ path: join(artifacts, `surprise${tag}-phone.png`), fullPage: true });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
    assert.ok(overflow <= 0, `the phone layout scrolls sideways by ${overflow} px`);

    // Text outside the vocabulary: a clear error, no stale heat map.
    await page.fill('#text', '\u4e16\u754c and more');
    await page.click('#score');
    await waitForState(page, ['error'], 60_000);
    assert.equal(await page.$$eval('#heat .ch', (s) => s.length), 0, 'the old heat map stays under the error');

    assert.deepEqual(problems, [], `${name}: the page logged errors or failed requests`);
    console.log(`surprise_test: ${name} ok: ${native.positions.length} positions equal native; load to ` +
                `final frame ${times.reveal.toFixed(0)} ms with the reveal, ${times.reducedMotion.toFixed(0)} ms ` +
                `with reduced motion`);
  } finally {
    await browser.close();
  }
}

let server = null;
let failed = false;
try {
  server = await startServer();
  for (const webgpu of [true, false]) {
    await runCase(server, { webgpu }).catch((e) => {
      failed = true;
      console.error(`surprise_test: FAIL (${webgpu ? 'WebGPU' : 'CPU'}): ${e.stack ?? e.message}`);
    });
  }
} catch (e) {
  failed = true;
  console.error(`surprise_test: FAIL: ${e.stack ?? e.message}`);
} finally {
  if (server && (await server.stop()) !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
