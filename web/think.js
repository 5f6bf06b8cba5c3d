// The "Watch it think" page: streams a generation and shows, for any step, the shortlist the
// model drew from and where its newest token attended. Everything it shows is in the DOM with
// data-* attributes (ids, probabilities, weights), so tests read what a person sees.
import { createForge } from './forge.js';
import {
  $, visible, percent, setState, showError, clearError, showDevice, candidateRow, loadProgress, onSubmit,
  samplingInputs,
} from './page.js';

const params = new URLSearchParams(location.search);
const TOP_N = 8;
const STOP_REASONS = {
  max_tokens: 'max tokens', eos: 'end of text', context_full: 'context full', callback: 'stopped',
  stop_string: 'stop text',
};

let forge = null;
let model = null;
let tokens = [];  // prompt + generated: { id, text }
let steps = [];   // per generated token: { id, pos, top, attention }
let running = false;
let run = null;  // the run on screen: { stopped, stop() }

/** A start-up failure: nothing may look as if it were still loading. */
function showStartError(error) {
  showError(error);
  $('load-progress').hidden = true;
  for (const id of ['backend', 'adapter', 'model-info']) {
    if ($(id).textContent === '…') $(id).textContent = 'not loaded';
  }
}

/** Empties the output, the stats and the step panels: a new run (or a failed one) starts clean. */
function clearRun() {
  tokens = [];
  steps = [];
  $('output').replaceChildren();
  $('shortlist').replaceChildren();
  $('attention').replaceChildren();
  for (const id of ['prefill', 'first-token', 'tokens-per-second', 'token-count', 'stop-reason']) $(id).textContent = '–';
  delete $('stop-reason').dataset.reason;
  $('step-label').textContent = '–';
  $('step').disabled = true;
  $('step').max = '0';
  $('step').value = '0';
}

/**
 * Stop and Esc end the run on screen at once. A forward pass already on the device cannot be
 * interrupted, so a stop during the prefill leaves that pass to finish in the background (its
 * first step is then refused, so it shows nothing), and the next run starts after it.
 */
function requestStop() {
  if (!run || run.stopped) return;
  run.stopped = true;
  $('stop').disabled = true;
  setState('stopping', 'Stopping…');
  run.stop();
}

/** Greedy ignores the temperature: the field says so instead of pretending to matter. */
function syncGreedy() {
  const greedy = $('greedy').checked;
  $('temperature').disabled = greedy;
  $('temperature-hint').hidden = !greedy;
}

function setRunning(on) {
  running = on;
  $('generate').disabled = on || model === null;
  $('stop').disabled = !on;
  $('prompt').readOnly = on;
}

function showModel(info) {
  const mb = (info.bytes / 1e6).toFixed(1);
  const millions = (info.parameters / 1e6).toFixed(2);
  $('model-info').textContent = `${info.layers} layers × ${info.heads} heads × ${info.width}, ` +
    `${millions} M parameters, ${mb} MB ${info.format}, ${info.tokenizer} tokenizer, ` +
    `context ${info.context}`;
  $('model-info').dataset.bytes = info.bytes;
  for (const [select, count] of [[$('layer'), info.layers], [$('head'), info.heads]]) {
    select.replaceChildren(...Array.from({ length: count }, (_, i) => new Option(String(i), i)));
  }
  $('layer').value = String(info.layers - 1);
}

function tokenSpan(token, pos, generated) {
  const span = document.createElement('span');
  span.className = generated ? 'tok gen' : 'tok prompt';
  span.dataset.id = token.id;
  span.dataset.pos = pos;
  span.textContent = token.text;
  return span;
}

function renderShortlist(step) {
  $('shortlist').replaceChildren(...step.top.map((c) => {
    const li = candidateRow(c);
    if (c.id === step.id) {
      li.classList.add('chosen');
      li.setAttribute('aria-current', 'true');
    }
    // The exact value, on hover (title) and on keyboard focus (the row is focusable).
    li.title = `${visible(c.text)}: p = ${c.probability}`;
    li.tabIndex = 0;
    return li;
  }));
}

function renderAttention(step) {
  const a = step.attention;
  const layer = Number($('layer').value), head = Number($('head').value);
  const row = a.weights.subarray((layer * a.heads + head) * a.length, (layer * a.heads + head + 1) * a.length);
  const max = row.reduce((m, w) => Math.max(m, w), 0) || 1;
  const strip = $('attention');
  strip.dataset.layer = layer;
  strip.dataset.head = head;
  strip.dataset.length = a.length;
  strip.replaceChildren(...Array.from(row, (w, pos) => {
    const cell = document.createElement('span');
    cell.className = 'cell';
    const token = tokens[a.windowStart + pos];
    cell.dataset.pos = a.windowStart + pos;
    if (token) cell.dataset.id = token.id;
    cell.dataset.weight = w;
    cell.style.setProperty('--w', w / max);
    cell.textContent = token ? visible(token.text) : '?';
    cell.title = `position ${a.windowStart + pos}: ${percent(w)}`;
    return cell;
  }));
}

function stepLabel(index) {
  return `${index + 1} of ${steps.length}: “${visible(tokens[steps[index].pos].text)}”`;
}

function showStep(index) {
  const step = steps[index];
  if (!step) return;
  $('step-label').textContent = stepLabel(index);
  for (const el of $('output').querySelectorAll('.current')) el.classList.remove('current');
  $('output').querySelector(`[data-pos="${step.pos}"]`)?.classList.add('current');
  renderShortlist(step);
  renderAttention(step);
}

/** The "Stop at" field as generate's stopStrings: none when blank; \n types a new line. */
function stopStrings() {
  const text = $('stop-at').value.replaceAll('\\n', '\n');
  return text ? [text] : [];
}

/**
 * After a stop string: the generated tokens past `kept` (the result's text) are struck through,
 * a token the cut falls inside is split, so the text not struck through is the result's.
 */
function markCut(kept) {
  let at = 0;
  for (const span of $('output').querySelectorAll('.tok.gen')) {
    const text = span.textContent;
    if (at >= kept.length) {
      span.classList.add('cut');
    } else if (at + text.length > kept.length) {
      const rest = document.createElement('span');
      rest.className = 'cut';
      rest.textContent = text.slice(kept.length - at);
      span.textContent = text.slice(0, kept.length - at);
      span.after(rest);
    }
    at += text.length;
  }
}

async function generate() {
  if (running || !model) return;
  clearError();
  clearRun();
  let options, promptIds;
  try {
    options = {
      ...samplingInputs(),
      topN: TOP_N,
      attention: true,
      slidingWindow: true,
      stopStrings: stopStrings(),
    };
    promptIds = model.encode($('prompt').value);
  } catch (e) {
    showError(e);
    return;
  }

  tokens = promptIds.map((id) => ({ id, text: model.decode([id]) }));
  $('output').replaceChildren(...tokens.map((t, pos) => tokenSpan(t, pos, false)));
  const thisRun = { stopped: false };
  const stopped = new Promise((resolve) => { thisRun.stop = () => resolve(null); });
  run = thisRun;
  setRunning(true);
  setState('generating', 'Generating…');

  let firstMs = 0;
  options.onToken = (step) => {
    if (thisRun.stopped) return false;
    const slider = $('step');
    // The panels follow the newest step unless the reader has moved the slider back.
    const followLatest = slider.disabled || slider.value === slider.max;
    const pos = tokens.length;
    tokens.push({ id: step.id, text: step.text });
    steps.push({ id: step.id, pos, top: step.top, attention: step.attention });
    $('output').append(tokenSpan(tokens[pos], pos, true));
    if (step.index === 0) {
      firstMs = step.elapsedMs;
      $('prefill').textContent = `${step.prefillMs.toFixed(1)} ms`;
      $('first-token').textContent = `${firstMs.toFixed(0)} ms`;
    } else {
      const rate = step.index * 1000 / (step.elapsedMs - firstMs);
      $('tokens-per-second').textContent = rate.toFixed(1);
    }
    $('token-count').textContent = String(steps.length);
    slider.max = String(steps.length - 1);
    slider.disabled = false;
    if (followLatest) {
      slider.value = slider.max;
      showStep(steps.length - 1);
    } else {
      $('step-label').textContent = stepLabel(Number(slider.value));  // the total grew
    }
    return !thisRun.stopped;
  };

  try {
    const generation = model.generate($('prompt').value, options);
    generation.catch(() => {});  // a run stopped before it returned has nothing more to say
    const result = await Promise.race([generation, stopped]);
    const reason = result ? result.stopReason : 'callback';
    if (reason === 'stop_string') markCut(result.text);
    if (result) {
      $('prefill').textContent = `${result.prefillMs.toFixed(1)} ms`;
      if (steps.length > 1) $('tokens-per-second').textContent = result.tokensPerSecond.toFixed(1);
    }
    $('token-count').textContent = String(steps.length);
    $('stop-reason').textContent = STOP_REASONS[reason] ?? reason;
    $('stop-reason').dataset.reason = reason;
    setState('done', `Done: ${steps.length} tokens`);
  } catch (e) {
    clearRun();
    showError(e);
  } finally {
    run = null;
    setRunning(false);
  }
}

async function start() {
  const backend = params.get('backend') ?? 'auto';
  if (!['auto', 'webgpu', 'cpu'].includes(backend)) {
    throw new Error(`?backend= must be auto, webgpu or cpu, not "${backend}"`);
  }
  forge = await createForge({ backend });
  showDevice(forge.device, 'WebGPU');
  model = await forge.loadModel('/model/', {
    checkpoint: params.get('checkpoint') ?? 'auto',
    onProgress: loadProgress(),
  });
  $('load-progress').hidden = true;
  showModel(model.info);
  setRunning(false);
  setState('ready', 'Ready');
}

onSubmit('prompt-form', 'prompt-form', 'generate', generate);
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape') requestStop();
});
$('stop').addEventListener('click', requestStop);
$('greedy').addEventListener('change', syncGreedy);
syncGreedy();
$('step').addEventListener('input', () => showStep(Number($('step').value)));
for (const id of ['layer', 'head']) {
  $(id).addEventListener('change', () => showStep(Number($('step').value)));
}
window.addEventListener('pagehide', () => {
  model?.dispose();
  forge?.dispose();
});

start().catch(showStartError);
