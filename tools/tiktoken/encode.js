// Encodes a batch of texts with OpenAI's tiktoken ("gpt2", encode_ordinary: special-token
// names are ordinary text) so tests can compare ids; one process for the whole batch.
//
//   node tools/tiktoken/encode.js IN OUT
//
// IN holds records (u32 little-endian byte length, that many bytes of UTF-8); OUT gets, per
// record, (u32 id count, that many u32 ids). Invalid UTF-8 in IN is an error, not replaced.
'use strict';
const fs = require('fs');
const { gpt2Encoding } = require('./tiktoken_module');

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node encode.js IN OUT');
  process.exit(2);
}
const data = fs.readFileSync(input);
// ignoreBOM keeps a leading U+FEFF as text instead of swallowing it.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const enc = gpt2Encoding();
const chunks = [];
let bytes = 0;
for (let pos = 0, record = 0; pos < data.length; ++record) {
  if (pos + 4 > data.length) throw new Error(`${input}: record ${record} is cut off`);
  const len = data.readUInt32LE(pos);
  pos += 4;
  if (pos + len > data.length) throw new Error(`${input}: record ${record} is cut off`);
  const ids = enc.encode_ordinary(utf8.decode(data.subarray(pos, pos + len)));
  pos += len;
  const count = Buffer.alloc(4);
  count.writeUInt32LE(ids.length);
  chunks.push(count, Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength));
  bytes += 4 + ids.byteLength;
}
enc.free();
fs.writeFileSync(output, Buffer.concat(chunks, bytes));
