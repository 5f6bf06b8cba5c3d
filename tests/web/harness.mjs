// What the browser test and the browser benchmark share: a real `forge serve` on a free port,
// Debian's Chromium driven by playwright-core (WebGPU through SwiftShader, or no WebGPU at all),
// native `forge generate` as the reference, and the page driven through its DOM.
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../../', import.meta.url));
export const SKIP = 77;  // ctest's SKIP_RETURN_CODE for this test

export const env = {
  cli: process.env.FORGE_CLI ?? join(root, 'build/forge'),
  site: process.env.FORGE_SITE_DIR ?? join(root, 'build-web/site'),
  model: process.env.FORGE_MODEL_DIR ?? join(root, 'models/forge-char'),
  chromium: process.env.FORGE_CHROMIUM ?? '/usr/bin/chromium',
  playwright: process.env.FORGE_PLAYWRIGHT ?? join(root, 'third_party/npm-browser/node_modules/playwright-core'),
};

/** playwright-core's chromium, or null when it is not installed (setup.d/browser.sh installs it). */
export function loadPlaywright() {
  try {
    return createRequire(import.meta.url)(env.playwright).chromium;
  } catch {
    return null;
  }
}

/** Rejects after ms with a message naming what took too long. */
export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took more than ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Native greedy generation: the ids the page must reproduce, and its timings. */
export function nativeGenerate(prompt, maxTokens, backend = 'cpu', extra = []) {
  const args = ['generate', '--backend', backend, '--model', env.model, '--prompt', prompt,
                '--greedy', '--max-tokens', String(maxTokens), '--format', 'json', ...extra];
  return new Promise((resolve, reject) => {
    execFile(env.cli, args, { timeout: 300_000, maxBuffer: 1 << 24 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`forge generate --backend ${backend} failed: ${stderr || error.message}`));
      else resolve(JSON.parse(stdout.slice(stdout.indexOf('{'))));
    });
  });
}

const servers = new Set();
process.on('exit', () => { for (const child of servers) child.kill('SIGKILL'); });

/** `forge serve --port 0` on the site and model; resolves once it prints its URL. */
export async function startServer() {
  const child = spawn(env.cli, ['serve', '--site', env.site, '--model', env.model, '--port', '0'],
                      { stdio: ['ignore', 'pipe', 'pipe'] });
  servers.add(child);
  child.on('exit', () => servers.delete(child));
  let log = '';
  const url = new Promise((resolve, reject) => {
    const read = (chunk) => {
      log += chunk;
      const m = log.match(/http:\/\/127\.0\.0\.1:\d+\//);
      if (m) resolve(m[0]);
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.on('exit', (code) => reject(new Error(`forge serve exited with ${code}: ${log}`)));
    child.on('error', reject);
  });
  return {
    url: await withTimeout(url, 20_000, 'forge serve starting'),
    log: () => log,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      const exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      const code = await withTimeout(exited, 5_000, 'forge serve stopping').catch(() => {
        child.kill('SIGKILL');
        return -1;
      });
      return code;
    },
  };
}

// DESIGN.md's flags; WebGPU (a SwiftShader adapter) only when asked for.
function chromiumArgs(webgpu) {
  const args = ['--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
                '--disable-component-update', '--disable-sync', '--no-proxy-server'];
  if (webgpu) args.push('--enable-unsafe-webgpu');
  return args;
}

/**
 * A fresh headless Chromium profile and page, recording every console error, page error,
 * failed request, HTTP error status and request to anywhere but `origin`. close() removes the
 * profile.
 */
export async function openBrowser(chromium, { webgpu, origin }) {
  const profile = mkdtempSync(join(tmpdir(), 'forge-chromium-'));
  const context = await withTimeout(chromium.launchPersistentContext(profile, {
    executablePath: env.chromium,
    headless: true,
    args: chromiumArgs(webgpu),
    viewport: { width: 1200, height: 900 },
    timeout: 60_000,
  }), 90_000, 'launching Chromium');
  const page = context.pages()[0] ?? await context.newPage();
  page.setDefaultTimeout(120_000);
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`failed request: ${r.url()} (${r.failure()?.errorText})`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  // The page must work offline: nothing but the server it came from (and data: URLs).
  page.on('request', (r) => {
    if (!r.url().startsWith(origin) && !r.url().startsWith('data:')) problems.push(`off-site request: ${r.url()}`);
  });
  return {
    page,
    problems,
    async close() {
      await withTimeout(context.close(), 30_000, 'closing Chromium').catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Waits until #status says one of the states; throws with the page's error message on 'error'. */
export async function waitForState(page, states, ms) {
  const selector = states.map((s) => `#status[data-state="${s}"]`).concat('#status[data-state="error"]').join(',');
  await page.waitForSelector(selector, { timeout: ms });
  const state = await page.getAttribute('#status', 'data-state');
  if (state === 'error' && !states.includes('error')) {
    throw new Error(`the page shows an error: ${await page.textContent('#error')}`);
  }
  return state;
}

/** Loads a page of the site ("Watch it think" unless `path` names another, with any query);
 * returns what it says about the device and model. */
export async function loadPage(page, url, path = 'think.html') {
  const started = performance.now();
  await page.goto(`${url}${path}`, { timeout: 60_000 });
  await waitForState(page, ['ready'], 180_000);
  return {
    loadMs: performance.now() - started,
    backend: await page.getAttribute('#backend', 'data-backend'),
    backendText: await page.textContent('#backend'),
    adapter: await page.textContent('#adapter'),
    fallback: await page.isVisible('#fallback-row') ? await page.textContent('#fallback') : null,
    model: await page.textContent('#model-info'),
  };
}

/** Greedy generation through the form (typed prompt, Ctrl+Enter); returns what the page shows. */
export async function generateOnPage(page, prompt, maxTokens) {
  await page.fill('#prompt', prompt);
  await page.fill('#max-tokens', String(maxTokens));
  await page.check('#greedy');
  await page.focus('#prompt');
  await page.keyboard.press('Control+Enter');
  await waitForState(page, ['done'], 300_000);
  const ids = await page.$$eval('#output .tok.gen', (spans) => spans.map((s) => Number(s.dataset.id)));
  const promptIds = await page.$$eval('#output .tok.prompt', (spans) => spans.map((s) => Number(s.dataset.id)));
  const stat = async (id) => (await page.textContent(id)).trim();
  return {
    ids,
    promptIds,
    text: await page.$$eval('#output .tok.gen', (spans) => spans.map((s) => s.textContent).join('')),
    prefill: await stat('#prefill'),
    firstToken: await stat('#first-token'),
    tokensPerSecond: await stat('#tokens-per-second'),
  };
}
