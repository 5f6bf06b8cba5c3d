// forge serve under concurrent streams: time to first token and tokens/s per stream and in all,
// at each concurrency. Needs only the forge binary and node (no network, no npm packages).
//   node bench/serve_bench.mjs --cli build/forge --model models/forge-char \
//     [--streams 1,4,8,16,32] [--tokens 64] [--repeat 3] [--backend cpu|webgpu] [--json OUT.json]
// Each concurrency runs --repeat times and the run with the highest aggregate is kept, so that a
// shared machine's other load shows less in the figures.
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { startServe } from '../tests/serve/forge_serve.mjs';

const { values: a } = parseArgs({ options: {
  cli: { type: 'string', default: 'build/forge' },
  model: { type: 'string', default: 'models/forge-char' },
  streams: { type: 'string', default: '1,4,8,16,32' },
  tokens: { type: 'string', default: '64' },
  repeat: { type: 'string', default: '3' },
  backend: { type: 'string', default: 'cpu' },
  json: { type: 'string' },
} });
const counts = a.streams.split(',').map(Number);
const tokens = Number(a.tokens);
const slots = Math.max(...counts);
const server = await startServe(a.cli, a.model, ['--backend', a.backend, '--slots', String(slots)]);
const model = (await (await fetch(`${server.url}v1/models`)).json()).data[0].id;

// One greedy stream; its first-token time and the time of each later token.
async function stream(prompt) {
  const start = performance.now();
  const response = await fetch(`${server.url}v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, prompt, max_tokens: tokens, temperature: 0, stream: true,
                           stream_options: { include_usage: true } }),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  let first = null, buffer = '', generated = 0;
  const decoder = new TextDecoder();
  for await (const bytes of response.body) {
    if (first === null) first = performance.now();
    buffer += decoder.decode(bytes, { stream: true });
    let at;
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      const data = buffer.slice(6, at);
      buffer = buffer.slice(at + 2);
      if (data !== '[DONE]' && JSON.parse(data).usage) generated = JSON.parse(data).usage.completion_tokens;
    }
  }
  const end = performance.now();
  return { ttft: first - start, perStream: (generated - 1) / ((end - first) / 1000), generated, end };
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
await stream('Warm up ');
const rows = [];
for (const n of counts) {
  let best = null;
  for (let k = 0; k < Number(a.repeat); ++k) {
    const start = performance.now();
    const runs = await Promise.all(Array.from({ length: n }, (_, i) => stream(`The Congress ${i} `)));
    const wall = (Math.max(...runs.map((r) => r.end)) - start) / 1000;
    const total = runs.reduce((s, r) => s + r.generated, 0);
    const row = { streams: n, ttft_ms: median(runs.map((r) => r.ttft)),
                  per_stream_tokens_per_s: median(runs.map((r) => r.perStream)),
                  aggregate_tokens_per_s: total / wall, tokens: total };
    if (!best || row.aggregate_tokens_per_s > best.aggregate_tokens_per_s) best = row;
  }
  rows.push(best);
}
server.stop();
console.log(`model ${model}, backend ${a.backend}, ${tokens} greedy tokens per stream (medians; best of ${a.repeat} runs)`);
console.log('| streams | TTFT ms | tokens/s per stream | aggregate tokens/s | vs 1 stream |');
console.log('| ---: | ---: | ---: | ---: | ---: |');
const one = rows.find((r) => r.streams === 1)?.aggregate_tokens_per_s;
for (const r of rows) {
  console.log(`| ${r.streams} | ${r.ttft_ms.toFixed(1)} | ${r.per_stream_tokens_per_s.toFixed(1)} | ` +
              `${r.aggregate_tokens_per_s.toFixed(1)} | ${one ? (r.aggregate_tokens_per_s / one).toFixed(2) + '×' : ''} |`);
}
if (a.json) fs.writeFileSync(a.json, JSON.stringify(rows, null, 2));
