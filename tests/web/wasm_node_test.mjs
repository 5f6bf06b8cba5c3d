// The wasm module under node (CPU backend: node has no WebGPU), through the public forge.js API,
// against the native CLI on the same models.
//
// Usage: node wasm_node_test.mjs SITE_DIR NATIVE_FORGE SOURCE_ROOT
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { test, after, before } from 'node:test';
import { pathToFileURL } from 'node:url';

const [siteDir, nativeForge, sourceRoot] = process.argv.slice(2);
assert.ok(siteDir && nativeForge && sourceRoot, 'usage: wasm_node_test.mjs SITE_DIR NATIVE_FORGE SOURCE_ROOT');

const { createForge } = await import(pathToFileURL(path.join(siteDir, 'forge.js')).href);
const wasmBinary = fs.readFileSync(path.join(siteDir, 'forge_wasm.wasm'));

// Model directories: the shipped char model (an 8-bit compact checkpoint), the same model as
// f32 safetensors written by the native converter, the tiny BPE golden model with GPT-2's real
// vocabulary (assembled as tests/gpt2_golden_test.cpp finds it), and a truncated checkpoint.
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'forge-wasm-test-'));
const compactDir = path.join(sourceRoot, 'models/forge-char');
const charDir = path.join(work, 'char');
const bpeDir = path.join(work, 'tiny');
const corruptDir = path.join(work, 'corrupt');
for (const dir of [charDir, bpeDir, corruptDir]) fs.mkdirSync(dir);
for (const f of ['config.json', 'model.safetensors']) {
  fs.copyFileSync(path.join(sourceRoot, 'tests/data/golden/tiny', f), path.join(bpeDir, f));
}
for (const f of ['vocab.json', 'merges.txt']) {
  fs.copyFileSync(path.join(sourceRoot, 'third_party/gpt2', f), path.join(bpeDir, f));
}
for (const f of ['config.json', 'vocab.json']) {
  fs.copyFileSync(path.join(compactDir, f), path.join(charDir, f));
  fs.copyFileSync(path.join(compactDir, f), path.join(corruptDir, f));
}
execFileSync(nativeForge, ['convert', '--input', path.join(compactDir, 'model.compact'),
                           '--output', path.join(charDir, 'model.safetensors'), '--to', 'safetensors']);
const checkpoint = fs.readFileSync(path.join(charDir, 'model.safetensors'));
fs.writeFileSync(path.join(corruptDir, 'model.safetensors'), checkpoint.subarray(0, checkpoint.length >> 1));

const served = { '/char/': charDir, '/tiny/': bpeDir, '/corrupt/': corruptDir, '/compact/': compactDir };
const server = http.createServer((req, res) => {
  const prefix = Object.keys(served).find((p) => req.url.startsWith(p));
  const file = prefix && path.join(served[prefix], path.basename(req.url));
  if (!file || !fs.existsSync(file)) {
    res.writeHead(404).end();
    return;
  }
  const body = fs.readFileSync(file);
  res.writeHead(200, { 'content-length': body.length }).end(body);
});
let base;
before(async () => {
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => {
  server.close();
  fs.rmSync(work, { recursive: true, force: true });
});

function native(args) {
  return JSON.parse(execFileSync(nativeForge, [...args, '--backend', 'cpu', '--format', 'json'],
                                 { encoding: 'utf8', maxBuffer: 1 << 26 }));
}

async function cpuForge() {
  return createForge({ backend: 'cpu', wasmBinary });
}

test('greedy ids of the shipped char model equal the native CLI', async () => {
  const forge = await cpuForge();
  const model = await forge.loadModel(`${base}/char/`);
  const prompt = 'Mr. Speaker, the state of the Union';
  const want = native(['generate', '--model', charDir, '--prompt', prompt, '--greedy', '--max-tokens', '48']);
  const t0 = performance.now();
  const got = await model.generate(prompt, { greedy: true, maxTokens: 48 });
  const ms = performance.now() - t0;
  assert.deepEqual(got.ids, want.ids);
  assert.equal(got.text, want.text);
  assert.deepEqual(got.promptIds, want.prompt_ids);
  console.log(`# wasm CPU (node, 1 thread) ${model.info.parameters} parameters: prefill ${got.prefillMs.toFixed(1)} ms, ` +
              `${got.tokensPerSecond.toFixed(1)} tokens/s decode, ${(got.ids.length * 1000 / ms).toFixed(1)} tokens/s overall`);
  model.dispose();
  forge.dispose();
});

test('greedy ids of the tiny BPE model equal the native CLI', async () => {
  const forge = await cpuForge();
  const model = await forge.loadModel(`${base}/tiny/`);
  assert.equal(model.info.tokenizer, 'bpe');
  const prompt = 'Hello, my name is';
  const want = native(['generate', '--model', bpeDir, '--prompt', prompt, '--greedy', '--max-tokens', '24']);
  const got = await model.generate(prompt, { greedy: true, maxTokens: 24 });
  assert.deepEqual(got.ids, want.ids);
  assert.equal(got.stopReason, want.stop_reason);
  model.dispose();
  forge.dispose();
});

test('a compact checkpoint loads and its greedy ids equal the native CLI on it', async () => {
  const forge = await cpuForge();
  const model = await forge.loadModel(`${base}/compact/`, { checkpoint: 'model.compact' });
  assert.equal(model.info.format, 'compact');
  assert.equal(model.info.bytes, fs.statSync(path.join(compactDir, 'model.compact')).size);
  const prompt = 'Fellow citizens';
  const want = native(['generate', '--model', compactDir, '--prompt', prompt, '--greedy', '--max-tokens', '32']);
  const got = await model.generate(prompt, { greedy: true, maxTokens: 32 });
  assert.deepEqual(got.ids, want.ids);
  model.dispose();
  forge.dispose();
});

test('BPE tokenization equals native across Unicode classes', async () => {
  const forge = await cpuForge();
  const model = await forge.loadModel(`${base}/tiny/`);
  const texts = [
    "Hello world! It's 2026, isn't it?  \n\n\tTabs   and spaces ",
    'Grüße aus Köln — naïve café, ΑΒΓ δέλτα, Привет мир',
    '日本語のテキスト、中文字符 와 한국어 ١٢٣ ٤٥٦ ⅫⅣ ²³ 🎉👍🏽 e\u0301',
    '<|endoftext|> is ordinary text; \u00a0nbsp\u2003em\u3000ideographic',
    // Unicode 16 letters and digits, which libutf8proc 2.8 lacks and the table must carry.
    'x\u1C89y \u{10D40}\u{10D41} a\u{16D40}b 7\u{1CCF0}',
  ];
  for (const text of texts) {
    const want = native(['tokenize', '--model', bpeDir, '--text', text]).ids;
    const ids = model.encode(text);
    assert.deepEqual(ids, want, text);
    assert.equal(model.decode(ids), text);
  }
  model.dispose();
  forge.dispose();
});

test('each step reports a sorted shortlist and attention rows that sum to 1', async () => {
  const forge = await cpuForge();
  const model = await forge.loadModel(`${base}/char/`);
  const steps = [];
  const result = await model.generate('The economy', {
    maxTokens: 6, seed: 7, topN: 5, attention: true, onToken: (step) => { steps.push(step); },
  });
  assert.equal(steps.length, result.ids.length);
  const promptLength = result.promptIds.length;
  steps.forEach((step, i) => {
    assert.equal(step.index, i);
    assert.equal(step.id, result.ids[i]);
    assert.equal(step.top.length, 5);
    for (let j = 1; j < step.top.length; ++j) assert.ok(step.top[j - 1].probability >= step.top[j].probability);
    const { layers, heads, length, weights } = step.attention;
    assert.deepEqual([layers, heads, length], [model.info.layers, model.info.heads, promptLength + i]);
    assert.equal(weights.length, layers * heads * length);
    for (let row = 0; row < layers * heads; ++row) {
      const sum = weights.subarray(row * length, (row + 1) * length).reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(sum - 1) < 1e-4, `row ${row} sums to ${sum}`);
    }
  });
  assert.equal(steps.map((s) => s.text).join(''), result.text);
  model.dispose();
  forge.dispose();
});

test('stopStrings end the text as forge generate --stop does', async () => {
  const forge = await cpuForge();
  const model = await forge.loadModel(`${base}/char/`);
  const prompt = 'Mr. Speaker, the state of the Union';
  const args = ['generate', '--model', charDir, '--prompt', prompt, '--greedy', '--max-tokens', '48'];
  const stop = native(args).text.slice(20, 23);
  const want = native([...args, '--stop', stop]);
  assert.equal(want.stop_reason, 'stop_string');
  const steps = [];
  const got = await model.generate(prompt, {
    greedy: true, maxTokens: 48, stopStrings: [stop], onToken: (step) => { steps.push(step); },
  });
  assert.deepEqual(got.ids, want.ids);
  assert.equal(got.text, want.text);
  assert.equal(got.stopReason, 'stop_string');
  // Each step carries its token's own text: the stop string is among them, not in the result.
  assert.equal(steps.map((s) => s.text).join('').indexOf(stop), got.text.length);
  await assert.rejects(model.generate(prompt, { stopStrings: [''] }), /empty stop string/);
  await assert.rejects(model.generate(prompt, { stopStrings: 'x' }), /stopStrings must be an array/);
  model.dispose();
  forge.dispose();
});

test('onToken returning false stops generation', async () => {
  const forge = await cpuForge();
  const model = await forge.loadModel(`${base}/char/`);
  const result = await model.generate('Congress', { maxTokens: 20, onToken: (s) => s.index < 2 });
  assert.equal(result.ids.length, 3);
  assert.equal(result.stopReason, 'callback');
  model.dispose();
  forge.dispose();
});

test('a truncated checkpoint rejects with a clear message', async () => {
  const forge = await cpuForge();
  await assert.rejects(forge.loadModel(`${base}/corrupt/`), /model\.safetensors/);
  await assert.rejects(forge.loadModel(`${base}/missing/`), /HTTP 404/);
  forge.dispose();
});

test('an over-long prompt and out-of-vocabulary text reject cleanly', async () => {
  const forge = await cpuForge();
  const model = await forge.loadModel(`${base}/char/`);
  const tooLong = 'a'.repeat(model.info.context + 1);
  await assert.rejects(model.generate(tooLong, { greedy: true }), new RegExp(`exceeds the model's context of ${model.info.context} tokens`));
  await assert.rejects(model.generate('日本', { greedy: true }), /日|U\+65E5|vocabulary/);
  assert.throws(() => model.encode('\ud800'), /lone UTF-16 surrogate/);
  // The module still works after the errors.
  const after = await model.generate('The', { greedy: true, maxTokens: 3 });
  assert.equal(after.ids.length, 3);
  model.dispose();
  forge.dispose();
});

test('backend choice: auto falls back to the CPU without WebGPU, webgpu rejects', async () => {
  const forge = await createForge({ backend: 'auto', wasmBinary });
  assert.equal(forge.device.backend, 'cpu');
  assert.equal(forge.device.adapter, 'cpu (1 thread)');
  assert.match(forge.device.fallbackReason, /navigator\.gpu/);
  forge.dispose();
  await assert.rejects(createForge({ backend: 'webgpu', wasmBinary }), /WebGPU is not available/);
  await assert.rejects(createForge({ backend: 'metal', wasmBinary }), /backend must be one of/);
});
