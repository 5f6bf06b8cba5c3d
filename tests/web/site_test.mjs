// The site as one: every page's links, stylesheets, scripts and module imports resolve on a real
// `forge serve`, none points off the server, every page shares style.css and the navigation,
// each page's model is served, and the old "Watch it think" links (/?backend=…) still reach it.
// Then each page loads in headless Chromium with no failed or off-site request.
//
// Exit status: 0 pass, 1 fail, 77 skip (no chromium or playwright-core, unless
// FORGE_TEST_REQUIRE_WEBGPU=1).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { env, loadPlaywright, openBrowser, startServer, SKIP } from './harness.mjs';

const PAGES = ['index.html', 'think.html', 'surprise.html', 'council.html'];

setTimeout(() => {
  console.error('site_test: FAIL: the whole test took more than 5 minutes');
  process.exit(1);
}, 5 * 60_000).unref();

/** Every URL a file names: HTML href/src, CSS url(), JS static and dynamic imports. */
function references(name, text) {
  const found = [];
  const add = (re) => { for (const m of text.matchAll(re)) found.push(m[1]); };
  if (name.endsWith('.html')) add(/\s(?:href|src)="([^"]*)"/g);
  if (name.endsWith('.css')) add(/url\(\s*['"]?([^'")]*)['"]?\s*\)/g);
  if (name.endsWith('.js')) {
    add(/^\s*import\s[^'"]*?from\s+'([^']+)'/gm);
    add(/^\s*import\s+'([^']+)'/gm);
    add(/\bimport\(\s*'([^']+)'\s*\)/g);
  }
  return found.filter((u) => !u.startsWith('data:') && !u.startsWith('#'));
}

const chromium = loadPlaywright();
if (!chromium || !existsSync(env.chromium)) {
  const required = process.env.FORGE_TEST_REQUIRE_WEBGPU === '1';
  console.error(`site_test: ${required ? 'FAIL' : 'SKIP'}: Chromium or playwright-core is missing`);
  process.exit(required ? 1 : SKIP);
}

const server = await startServer();
let failed = false;
try {
  const origin = new URL(server.url);
  const get = async (url) => {
    const r = await fetch(url, { redirect: 'manual' });
    await r.arrayBuffer();
    return r.status;
  };
  // Every page the navigation names exists, and every file of the site resolves what it names.
  for (const page of PAGES) assert.ok(existsSync(join(env.site, page)), `the site has no ${page}`);
  const files = readdirSync(env.site).filter((f) => /\.(html|js|css)$/.test(f) && !f.startsWith('forge_wasm'));
  let checked = 0;
  for (const file of files) {
    const text = readFileSync(join(env.site, file), 'utf8');
    if (file.endsWith('.html')) {
      assert.match(text, /<link rel="stylesheet" href="style\.css">/, `${file} does not use the shared style.css`);
      const nav = text.match(/<nav class="site"[^]*?<\/nav>/)?.[0] ?? '';
      for (const page of PAGES.slice(1)) assert.ok(nav.includes(`href="${page}"`), `${file}'s navigation lacks ${page}`);
    }
    for (const ref of references(file, text)) {
      const url = new URL(ref, new URL(file, server.url));
      assert.equal(url.origin, origin.origin, `${file} names an off-site URL: ${ref}`);
      assert.equal(await get(url), 200, `${file} names ${ref}, which does not resolve`);
      ++checked;
    }
  }
  // Each page's model: the shipped one at /model/, the council's experts under /models/.
  assert.equal(await get(new URL('model/config.json', server.url)), 200);
  const listed = await (await fetch(new URL('models/', server.url))).json();
  assert.ok(listed.models.some((m) => m.startsWith('council')), `no council model served: ${JSON.stringify(listed)}`);

  // In the browser: each page loads with nothing failed or off-site; old links reach think.html.
  const browser = await openBrowser(chromium, { webgpu: false, origin: server.url });
  try {
    const { page, problems } = browser;
    for (const name of PAGES) {
      // networkidle: a page's model download is over before the next navigation could abort it.
      await page.goto(new URL(name, server.url).href, { waitUntil: 'networkidle' });
      assert.match(await page.title(), /Forge/, `${name} has no Forge title`);
      const current = await page.$$eval('nav.site a[aria-current="page"]', (as) => as.map((a) => a.getAttribute('href')));
      assert.equal(current.length, 1, `${name}: the navigation does not mark the current page`);
    }
    await page.goto(`${server.url}?backend=cpu`);
    await page.waitForURL(/think\.html\?backend=cpu$/, { timeout: 10_000 });
    await page.waitForLoadState('networkidle');
    assert.deepEqual(problems, [], 'a page logged errors or failed requests');
  } finally {
    await browser.close();
  }
  console.log(`site_test: ok: ${files.length} files, ${checked} references resolve, ${PAGES.length} pages load`);
} catch (e) {
  failed = true;
  console.error(`site_test: FAIL: ${e.stack ?? e.message}`);
} finally {
  if ((await server.stop()) !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
