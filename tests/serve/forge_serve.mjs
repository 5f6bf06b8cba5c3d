// A real `forge serve` for node scripts (the openai client test, bench/serve_bench.mjs): started
// on a free port with an empty site, stopped (or killed) when the script ends.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const children = new Set();
process.on('exit', () => { for (const child of children) child.kill('SIGKILL'); });

/** `forge serve` on `model` with extra flags; resolves to { url, stop } once it prints its URL. */
export async function startServe(cli, model, flags = []) {
  const site = fs.mkdtempSync(path.join(os.tmpdir(), 'forge-serve-site-'));
  fs.writeFileSync(path.join(site, 'index.html'), '<!doctype html><title>forge serve</title>');
  const child = spawn(cli, ['serve', '--site', site, '--model', model, '--port', '0', ...flags],
                      { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
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
  const timer = new Promise((_, reject) => setTimeout(() => reject(new Error(`forge serve did not start: ${log}`)), 30_000).unref());
  return {
    url: await Promise.race([url, timer]),
    log: () => log,
    stop() {
      child.kill('SIGTERM');
      fs.rmSync(site, { recursive: true, force: true });
    },
  };
}
