// Forge in the browser: the public ES-module API over forge_wasm (documented in README.md).
//
//   const forge = await createForge({ backend: 'auto' });
//   const model = await forge.loadModel('/model/');
//   const result = await model.generate('ROMEO:', { maxTokens: 64, onToken: (step) => {} });
//
// Every wasm call that may wait (loading, generating) goes through one queue: Asyncify runs one
// suspended call at a time, so a second would corrupt the first.
import createForgeWasm from './forge_wasm.js';

const BACKENDS = ['auto', 'webgpu', 'cpu'];

/** Asks the browser for a WebGPU device with every limit the adapter has. */
async function requestWebGpu() {
  if (typeof navigator === 'undefined' || !navigator.gpu) {
    throw new Error('WebGPU is not available in this browser (navigator.gpu is missing)');
  }
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new Error('WebGPU is available but the browser offers no adapter');
  const requiredLimits = {};
  for (const name in adapter.limits) {
    if (typeof adapter.limits[name] === 'number') requiredLimits[name] = adapter.limits[name];
  }
  const device = await adapter.requestDevice({ requiredLimits });
  const info = adapter.info ?? (adapter.requestAdapterInfo ? await adapter.requestAdapterInfo() : {});
  const name = info.description || [info.vendor, info.architecture].filter(Boolean).join(' ') ||
               'WebGPU adapter';
  return { device, name };
}

/** The char tokenizer's vocabulary maps single characters; GPT-2 BPE also needs merges.txt. */
function isCharVocabulary(vocab) {
  return Object.keys(vocab).every((key) => [...key].length === 1);
}

async function fetchOk(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`fetching ${url} failed: HTTP ${response.status}`);
  return response;
}

/** The body's bytes, reporting (loaded, total) as they arrive. */
async function fetchBytes(url, onProgress, response = null) {
  response ??= await fetchOk(url);
  const total = Number(response.headers.get('content-length')) || 0;
  if (!response.body || !onProgress) return new Uint8Array(await response.arrayBuffer());
  const reader = response.body.getReader();
  const chunks = [];
  let loaded = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    onProgress(loaded, Math.max(total, loaded));
  }
  const bytes = new Uint8Array(loaded);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return bytes;
}

class Native {
  constructor(module) {
    this.module = module;
    this.queue = Promise.resolve();
  }

  /** Throws the native forge::Error when a call returned 0. */
  check(result) {
    if (!result) throw new Error(this.module.UTF8ToString(this.module._forge_error()));
    return result;
  }

  /** A call returning JSON (or 0 on error). */
  json(result) {
    return JSON.parse(this.module.UTF8ToString(this.check(result)));
  }

  /** Copies bytes into wasm memory for the duration of fn(pointer). */
  withBytes(bytes, fn) {
    const ptr = this.module._malloc(Math.max(1, bytes.length));
    try {
      this.module.HEAPU8.set(bytes, ptr);
      return fn(ptr);
    } finally {
      this.module._free(ptr);
    }
  }

  async withBytesAsync(bytes, fn) {
    const ptr = this.module._malloc(Math.max(1, bytes.length));
    try {
      this.module.HEAPU8.set(bytes, ptr);
      return await fn(ptr);
    } finally {
      this.module._free(ptr);
    }
  }

  cstring(text) {
    return new TextEncoder().encode(`${text}\0`);
  }

  /** Runs an async native call after every earlier one has finished. */
  serial(fn) {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => {});
    return run;
  }

  callAsync(name, types, args) {
    return this.module.ccall(name, 'number', types, args, { async: true });
  }

  /**
   * Runs a generation export (forge_generate, forge_council_generate) over the prompt's ids and
   * the settings as JSON; its result with promptIds and tokensPerSecond (decode tokens after the
   * first over the decode time) added.
   */
  async generate(name, handle, promptIds, settings) {
    const words = Uint32Array.from(promptIds);
    const optionsBytes = this.cstring(JSON.stringify(settings));
    const result = await this.withBytesAsync(new Uint8Array(words.buffer), (ids) =>
      this.withBytesAsync(optionsBytes, (opts) =>
        this.callAsync(name, ['number', 'number', 'number', 'number'],
                       [handle, ids, words.length, opts])));
    const out = this.json(result);
    const decoded = out.ids.length - 1;
    out.promptIds = promptIds;
    out.tokensPerSecond = decoded > 0 && out.decodeMs > 0 ? (decoded * 1000) / out.decodeMs : 0;
    return out;
  }
}

/** A model directory's config.json, vocab.json and, for GPT-2 BPE, merges.txt, by file name. */
async function fetchModelFiles(base) {
  const vocabText = await (await fetchOk(`${base}vocab.json`)).text();
  let vocab;
  try {
    vocab = JSON.parse(vocabText);
  } catch (e) {
    throw new Error(`${base}vocab.json is not JSON: ${e.message}`);
  }
  const files = {
    'config.json': new Uint8Array(await (await fetchOk(`${base}config.json`)).arrayBuffer()),
    'vocab.json': new TextEncoder().encode(vocabText),
  };
  if (!isCharVocabulary(vocab)) {
    files['merges.txt'] = new Uint8Array(await (await fetchOk(`${base}merges.txt`)).arrayBuffer());
  }
  return files;
}

let nextModelDir = 0;

/**
 * Writes `files` into a fresh directory of the module's file system and, on the native queue,
 * returns wrap(load(dir)'s handle). The copies are removed afterwards: the weights then live in
 * tensors, and the files would only double the memory. A failed load's message names the URL
 * the files came from, not the in-memory directory the native loader read.
 */
function loadFromFiles(native, base, files, load, wrap) {
  const { FS } = native.module;
  const dir = `/models/${nextModelDir++}`;
  return native.serial(async () => {
    FS.mkdirTree(dir);
    try {
      for (const [name, data] of Object.entries(files)) FS.writeFile(`${dir}/${name}`, data);
      const handle = await load(dir);
      if (!handle) {
        const message = native.module.UTF8ToString(native.module._forge_error());
        throw new Error(message.replaceAll(`${dir}/`, base));
      }
      return wrap(handle);
    } finally {
      for (const name of Object.keys(files)) FS.unlink(`${dir}/${name}`);
      FS.rmdir(dir);
    }
  });
}

class Model {
  constructor(native, handle, info) {
    this.native = native;
    this.handle = handle;
    this.info = info;
  }

  alive() {
    if (!this.handle) throw new Error('this model has been disposed');
  }

  /** Text → token ids. Throws on text that is not a well-formed string. */
  encode(text) {
    this.alive();
    if (typeof text !== 'string') throw new Error(`encode needs a string, got ${typeof text}`);
    if (text.isWellFormed && !text.isWellFormed()) {
      throw new Error('text is not valid Unicode: it holds a lone UTF-16 surrogate');
    }
    const bytes = new TextEncoder().encode(text);
    return this.native.withBytes(bytes, (ptr) =>
      this.native.json(this.native.module._forge_encode(this.handle, ptr, bytes.length)));
  }

  /** Token ids → text (a partial UTF-8 character becomes U+FFFD). */
  decode(ids) {
    this.alive();
    const words = Uint32Array.from(ids);
    const bytes = new Uint8Array(words.buffer);
    return this.native.withBytes(bytes, (ptr) =>
      this.native.json(this.native.module._forge_decode(this.handle, ptr, words.length)));
  }

  async generate(prompt, options = {}) {
    this.alive();
    const { onToken, ...rest } = options;
    const settings = {
      maxTokens: 64, greedy: false, temperature: 1.0, topK: 0, topP: 1.0, seed: 0, topN: 8,
      attention: true, ...rest,
    };
    const promptIds = this.encode(prompt);
    return this.native.serial(async () => {
      this.alive();
      const native = this.native;
      const module = native.module;
      let callbackError = null;
      module.forgeOnStep = (stepJson, weights) => {
        const step = JSON.parse(stepJson);
        if (step.attention) step.attention.weights = weights;
        if (!onToken) return 1;
        try {
          return onToken(step) === false ? 0 : 1;
        } catch (e) {
          callbackError = e;
          return 0;
        }
      };
      try {
        const out = await native.generate('forge_generate', this.handle, promptIds, settings)
          .catch((e) => { throw callbackError ?? e; });
        if (callbackError) throw callbackError;
        return out;
      } finally {
        module.forgeOnStep = null;
      }
    });
  }

  // ---- Surprise (issue 14 section 3) ----
  /**
   * Scores every token of `text` after the first in one teacher-forced pass (forge::score's
   * strided windows past the context), as `forge surprise` does. Returns { ids, first: { id,
   * text }, positions: [{ id, text, bits, top: [{ id, text, probability }] }], stride,
   * windows, ms }: bits = −log₂ p of the token that actually follows, top the topK most
   * probable tokens, descending.
   */
  async score(text, { topK = 8 } = {}) {
    this.alive();
    if (!Number.isInteger(topK) || topK < 0) throw new Error(`topK must be an integer ≥ 0, got ${topK}`);
    const ids = this.encode(text);
    if (ids.length < 2) throw new Error(`scoring needs at least two tokens; the text has ${ids.length}`);
    return this.native.serial(async () => {
      this.alive();
      const native = this.native;
      const words = Uint32Array.from(ids);
      const started = performance.now();
      const result = await native.withBytesAsync(new Uint8Array(words.buffer), (ptr) =>
        native.callAsync('forge_score', ['number', 'number', 'number', 'number'],
                         [this.handle, ptr, words.length, topK]));
      const scored = native.json(result);
      const ms = performance.now() - started;
      const texts = ids.map((id) => this.decode([id]));
      return {
        ids,
        first: { id: ids[0], text: texts[0] },
        positions: scored.bits.map((bits, i) => ({
          id: ids[i + 1], text: texts[i + 1], bits, top: scored.top[i] ?? [],
        })),
        stride: scored.stride,
        windows: scored.windows,
        ms,
      };
    });
  }
  // ---- end of the Surprise block ----

  dispose() {
    if (!this.handle) return;
    const handle = this.handle;
    this.handle = 0;
    this.native.serial(() => this.native.module._forge_model_free(handle));
  }
}

// ---- The council (issue 15, council.html): experts that merge their hidden states ----------

/** A checked prompt's UTF-8 bytes: a non-string or a lone UTF-16 surrogate is an error. */
function promptBytes(text) {
  if (typeof text !== 'string') throw new Error(`encode needs a string, got ${typeof text}`);
  if (text.isWellFormed && !text.isWellFormed()) {
    throw new Error('text is not valid Unicode: it holds a lone UTF-16 surrogate');
  }
  return new TextEncoder().encode(text);
}

function checkBeta(beta) {
  if (typeof beta !== 'number' || !Number.isFinite(beta) || beta < 0) {
    throw new Error(`beta must be a finite number ≥ 0, got ${beta}`);
  }
  return beta;
}

/** Several experts sharing one head (forge::Council): loaded by Forge.loadCouncil. */
class Council {
  constructor(native, handle, info) {
    this.native = native;
    this.handle = handle;
    this.info = info;
    this.beta = 1.0;
  }

  alive() {
    if (!this.handle) throw new Error('this council has been disposed');
  }

  encode(text) {
    this.alive();
    const bytes = promptBytes(text);
    return this.native.withBytes(bytes, (ptr) =>
      this.native.json(this.native.module._forge_council_encode(this.handle, ptr, bytes.length)));
  }

  decode(ids) {
    this.alive();
    const words = Uint32Array.from(ids);
    return this.native.withBytes(new Uint8Array(words.buffer), (ptr) =>
      this.native.json(this.native.module._forge_council_decode(this.handle, ptr, words.length)));
  }

  /** The router's β from the next step on, also during a run (generate's beta starts it). */
  setBeta(beta) {
    this.beta = checkBeta(beta);
  }

  /**
   * Continues the prompt with every expert, merging their hidden states each step. options:
   * { maxTokens, greedy, temperature, topK, topP, seed, beta, onStep }. onStep(step) runs once
   * per token and may return false to stop: step = { index, id, text, beta, elapsedMs,
   * experts: [{ name, weight, entropy, topId, topText }], hidden: Float32Array
   * [experts][width] (each expert's hidden state after ln_f) }.
   */
  async generate(prompt, options = {}) {
    this.alive();
    const { onStep, ...rest } = options;
    const settings = {
      maxTokens: 64, greedy: false, temperature: 1.0, topK: 0, topP: 1.0, seed: 0, beta: this.beta,
      ...rest,
    };
    this.setBeta(settings.beta);
    const promptIds = this.encode(prompt);
    return this.native.serial(async () => {
      this.alive();
      const native = this.native;
      const module = native.module;
      const names = this.info.experts.map((x) => x.name);
      let beta = settings.beta;  // the β of the step being computed
      let callbackError = null;
      module.forgeOnCouncilStep = (stepJson, hidden) => {
        const step = JSON.parse(stepJson);
        step.beta = beta;
        step.hidden = hidden;
        step.experts.forEach((x, i) => { x.name = names[i]; });
        try {
          if (onStep && onStep(step) === false) return -1;
        } catch (e) {
          callbackError = e;
          return -1;
        }
        beta = this.beta;
        return beta;
      };
      try {
        const out = await native.generate('forge_council_generate', this.handle, promptIds, settings)
          .catch((e) => { throw callbackError ?? e; });
        if (callbackError) throw callbackError;
        return out;
      } finally {
        module.forgeOnCouncilStep = null;
      }
    });
  }

  dispose() {
    if (!this.handle) return;
    const handle = this.handle;
    this.handle = 0;
    this.native.serial(() => this.native.module._forge_council_free(handle));
  }
}

/**
 * Fetches a council directory's shared config.json and vocabulary and the expert checkpoints
 * named in `experts` (file names inside it), and loads them on forge's device.
 * onProgress(loaded, total) follows the checkpoints' bytes together.
 */
async function loadCouncil(forge, url, { experts, onProgress } = {}) {
  if (!forge.runtime) throw new Error('this Forge has been disposed');
  if (!Array.isArray(experts) || experts.length === 0 ||
      !experts.every((x) => typeof x === 'string' && /^[^/\\]+\.(compact|safetensors)$/.test(x) &&
                            !x.startsWith('.'))) {
    throw new Error('experts must be a non-empty list of checkpoint file names (*.compact or *.safetensors)');
  }
  const base = url.endsWith('/') ? url : `${url}/`;
  const files = await fetchModelFiles(base);
  const responses = await Promise.all(experts.map((name) => fetchOk(`${base}${name}`)));
  const totals = responses.map((r) => Number(r.headers.get('content-length')) || 0);
  const loaded = experts.map(() => 0);
  const report = () => {
    const sum = (xs) => xs.reduce((a, b) => a + b, 0);
    onProgress?.(sum(loaded), Math.max(sum(totals), sum(loaded)));
  };
  const bodies = await Promise.all(responses.map((r, i) =>
    fetchBytes(`${base}${experts[i]}`, (n) => { loaded[i] = n; report(); }, r)));
  experts.forEach((name, i) => { files[name] = bodies[i]; });

  const native = forge.native;
  const load = (dir) =>
    native.withBytesAsync(native.cstring(dir), (d) =>
      native.withBytesAsync(native.cstring(JSON.stringify(experts)), (n) =>
        native.callAsync('forge_council_load', ['number', 'number', 'number'],
                         [forge.runtime, d, n])));
  return loadFromFiles(native, base, files, load, (handle) => {
    const info = native.json(native.module._forge_council_info(handle));
    info.bytes = bodies.reduce((sum, b) => sum + b.length, 0);
    return new Council(native, handle, info);
  });
}
// ---- end of the council -------------------------------------------------------------------

class Forge {
  constructor(native, runtime, device) {
    this.native = native;
    this.runtime = runtime;
    this.device = device;
  }

  /**
   * Fetches a model directory (config.json, the checkpoint, vocab.json and, for GPT-2 BPE,
   * merges.txt) and loads it. onProgress(loaded, total) follows the checkpoint's bytes.
   * checkpoint 'auto' (the default) takes model.compact and falls back to model.safetensors
   * when the directory has none: in a browser the smaller download is the better choice.
   */
  async loadModel(url, options = {}) {
    if (!this.runtime) throw new Error('this Forge has been disposed');
    let { checkpoint = 'auto', onProgress } = options;
    if (!['auto', 'model.safetensors', 'model.compact'].includes(checkpoint)) {
      throw new Error(`checkpoint must be 'auto', 'model.safetensors' or 'model.compact', got '${checkpoint}'`);
    }
    const base = url.endsWith('/') ? url : `${url}/`;
    const files = await fetchModelFiles(base);
    let response = null;
    if (checkpoint === 'auto') {
      response = await fetch(`${base}model.compact`);
      checkpoint = 'model.compact';
      if (response.status === 404) {
        response = await fetch(`${base}model.safetensors`);
        checkpoint = 'model.safetensors';
        if (response.status === 404) {
          throw new Error(`${base} has neither model.compact nor model.safetensors (HTTP 404)`);
        }
      }
      if (!response.ok) throw new Error(`fetching ${base}${checkpoint} failed: HTTP ${response.status}`);
    }
    if (!response) {
      response = await fetch(`${base}${checkpoint}`);
      if (response.status === 404) {
        const other = checkpoint === 'model.compact' ? 'model.safetensors' : 'model.compact';
        throw new Error(`${base} has no ${checkpoint} (HTTP 404): load what it has with checkpoint ` +
                        `'auto' (the page: leave ?checkpoint= out), or write one with ` +
                        `\`forge convert --input ${other} --output ${checkpoint} --to ` +
                        `${checkpoint.slice('model.'.length)}\``);
      }
      if (!response.ok) throw new Error(`fetching ${base}${checkpoint} failed: HTTP ${response.status}`);
    }
    files[checkpoint] = await fetchBytes(`${base}${checkpoint}`, onProgress, response);
    const bytes = files[checkpoint].length;

    const native = this.native;
    const load = (dir) =>
      native.withBytesAsync(native.cstring(dir), (ptr) =>
        native.callAsync('forge_model_load', ['number', 'number'], [this.runtime, ptr]));
    return loadFromFiles(native, base, files, load, (handle) => {
      const info = native.json(native.module._forge_model_info(handle));
      info.bytes = bytes;
      info.format = checkpoint === 'model.compact' ? 'compact' : 'safetensors';
      return new Model(native, handle, info);
    });
  }

  /** The council's experts (see loadCouncil above): loadCouncil('/models/council/', { experts }). */
  loadCouncil(url, options) {
    return loadCouncil(this, url, options);
  }

  dispose() {
    if (!this.runtime) return;
    const runtime = this.runtime;
    this.runtime = 0;
    this.native.serial(() => this.native.module._forge_runtime_free(runtime));
  }
}

/**
 * Starts Forge. backend: 'auto' (WebGPU when the browser gives an adapter, else the CPU),
 * 'webgpu' (rejects without one) or 'cpu'. wasmBinary: the module's bytes, for hosts without
 * fetch of file URLs (node); a browser leaves it out.
 */
export async function createForge(options = {}) {
  const { backend = 'auto', wasmBinary } = options;
  if (!BACKENDS.includes(backend)) {
    throw new Error(`backend must be one of ${BACKENDS.join(', ')}, got '${backend}'`);
  }
  let gpu = null;
  let fallbackReason = null;
  if (backend !== 'cpu') {
    try {
      gpu = await requestWebGpu();
    } catch (e) {
      if (backend === 'webgpu') throw e;
      fallbackReason = e.message;
    }
  }
  const module = await createForgeWasm({
    ...(wasmBinary ? { wasmBinary } : {}),
    ...(gpu ? { preinitializedWebGPUDevice: gpu.device, forgeAdapterName: gpu.name } : {}),
  });
  const native = new Native(module);
  const kind = gpu ? 'webgpu' : 'cpu';
  const runtime = native.check(await native.serial(() =>
    native.withBytesAsync(native.cstring(kind), (ptr) =>
      native.callAsync('forge_runtime_create', ['number'], [ptr]))));
  const adapter = module.UTF8ToString(module._forge_runtime_adapter(runtime));
  return new Forge(native, runtime, { backend: kind, adapter, fallbackReason });
}
