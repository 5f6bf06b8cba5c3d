// tiktoken's side of bench/bench_tokenizer.cpp: encodes one text in one encode_ordinary call,
// after a warm-up, and reports the best of several runs as JSON on stdout.
//
//   node tools/tiktoken/bench.js TEXT IDS_OUT [RUNS]
//
// The time includes tiktoken's JS → wasm string transfer, as any caller pays it.
'use strict';
const fs = require('fs');
const { gpt2Encoding } = require('./tiktoken_module');

const [textPath, idsPath, runsArg] = process.argv.slice(2);
if (!textPath || !idsPath) {
  console.error('usage: node bench.js TEXT IDS_OUT [RUNS]');
  process.exit(2);
}
const runs = Number(runsArg || 5);
const raw = fs.readFileSync(textPath);
const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(raw);
const enc = gpt2Encoding();
let ids = enc.encode_ordinary(text);
let best = Infinity;
for (let r = 0; r < runs; ++r) {
  const start = process.hrtime.bigint();
  ids = enc.encode_ordinary(text);
  best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
}
fs.writeFileSync(idsPath, Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength));
console.log(JSON.stringify({ bytes: raw.length, tokens: ids.length, runs, best_s: best,
                             mb_per_s: raw.length / 1e6 / best }));
enc.free();
