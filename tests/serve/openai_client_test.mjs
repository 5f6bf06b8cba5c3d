// The official `openai` npm client against a real `forge serve` on the shipped model: the model
// list, a completion, the same completion streamed, and the client's errors for an unknown model
// and a wrong key. Usage: node openai_client_test.mjs FORGE_CLI SOURCE_DIR
import assert from 'node:assert/strict';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startServe } from './forge_serve.mjs';

const [cli, source] = process.argv.slice(2);
const require = createRequire(path.join(source, 'third_party/npm/package.json'));
const { default: OpenAI } = await import(require.resolve('openai'));
setTimeout(() => { console.error('openai client test: over its 120 s bound'); process.exit(1); }, 120_000).unref();

const server = await startServe(cli, path.join(source, 'models/forge-char'), ['--api-key', 'sesame']);
try {
  const client = new OpenAI({ baseURL: `${server.url}v1`, apiKey: 'sesame', maxRetries: 0 });

  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['forge-char']);

  const request = { model: 'forge-char', prompt: 'The Congress ', max_tokens: 24, temperature: 0 };
  const completion = await client.completions.create(request);
  assert.equal(completion.object, 'text_completion');
  assert.equal(completion.choices[0].finish_reason, 'length');
  assert.equal(completion.usage.completion_tokens, 24);
  assert.equal(completion.usage.prompt_tokens, 'The Congress '.length);
  const text = completion.choices[0].text;
  assert.ok(text.length > 0);

  let streamed = '', chunks = 0, finish = null, usage = null;
  const stream = await client.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    streamed += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    else ++chunks;
  }
  assert.equal(streamed, text, 'the stream and the plain completion differ');
  assert.equal(chunks, 24);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 24);

  const logprobs = await client.completions.create({ ...request, max_tokens: 3, logprobs: 2 });
  assert.equal(logprobs.choices[0].logprobs.tokens.length, 3);
  assert.equal(Object.keys(logprobs.choices[0].logprobs.top_logprobs[0]).length, 2);

  await assert.rejects(client.completions.create({ ...request, model: 'gpt-4' }),
                       (e) => e instanceof OpenAI.NotFoundError && /gpt-4/.test(e.message));
  await assert.rejects(client.completions.create({ ...request, temperature: 9 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  const stranger = new OpenAI({ baseURL: `${server.url}v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(stranger.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
  console.log(`openai client test: ok (${JSON.stringify(text)})`);
} finally {
  server.stop();
}
