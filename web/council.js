// The council page: four era experts continue a prompt together (forge::Council through
// forge.js's loadCouncil). For the step under the slider it shows each expert's weight, entropy,
// own top choice and hidden state next to the merged choice. What it shows is in the DOM with
// data-* attributes (ids, weights, entropies), so tests read what a person sees.
import { createForge } from './forge.js';
import {
  $, visible, setState, showError, clearError, showDevice, loadProgress, onSubmit,
  samplingInputs,
} from './page.js';

const params = new URLSearchParams(location.search);
const COUNCIL_URL = '/models/council/';
// The shipped experts (models/council/); ?experts=a.compact,b.compact picks others there.
const EXPERTS = ['1790-1860.compact', '1861-1913.compact', '1914-1960.compact', '1961-2018.compact'];
const STOP_REASONS = {
  max_tokens: 'max tokens', eos: 'end of text', context_full: 'context full', callback: 'stopped',
};

let forge = null;
let council = null;
let tokens = [];  // prompt + generated: { id, text }
let steps = [];   // per generated token: the step forge.js reported, plus its position
let running = false;
let stopRequested = false;

function setRunning(on) {
  running = on;
  $('generate').disabled = on || council === null;
  $('stop').disabled = !on;
  $('prompt').readOnly = on;
}

function showCouncil(info) {
  const mb = (info.bytes / 1e6).toFixed(1);
  const millions = (info.experts[0].parameters / 1e6).toFixed(2);
  $('model-info').textContent = `${info.experts.length} × (${info.layers} layers × ${info.heads} heads × ` +
    `${info.width}, ${millions} M parameters), ${mb} MB, ${info.tokenizer} tokenizer, context ${info.context}`;
  $('width').textContent = String(info.width);
}

/** β from the number box, or an error naming the control. */
function betaInput() {
  const beta = Number($('beta').value);
  if ($('beta').value.trim() === '' || !Number.isFinite(beta) || beta < 0) {
    throw new Error('β must be a number ≥ 0');
  }
  return beta;
}

function tokenSpan(token, pos, step) {
  const span = document.createElement('span');
  span.className = step ? 'tok gen' : 'tok prompt';
  span.dataset.id = token.id;
  span.dataset.pos = pos;
  span.textContent = token.text;
  if (step) {
    span.dataset.weights = JSON.stringify(step.experts.map((x) => x.weight));
    span.title = step.experts.map((x) => `${x.name} ${(x.weight * 100).toFixed(1)}%`).join(' · ');
  }
  return span;
}

/** The colour of a hidden value on the step's scale: blue below zero, orange above. */
function heat(value, scale) {
  const a = Math.min(1, Math.abs(value) / scale);
  return value < 0 ? `rgba(37, 99, 235, ${a})` : `rgba(194, 65, 12, ${a})`;
}

/** One column per dimension; the tooltip-free canvas carries its numbers in data-* for tests. */
function drawStrip(canvas, values, scale) {
  canvas.width = values.length;
  canvas.height = 1;
  const ctx = canvas.getContext('2d');
  ctx.clearRect(0, 0, values.length, 1);
  values.forEach((v, i) => {
    ctx.fillStyle = heat(v, scale);
    ctx.fillRect(i, 0, 1, 1);
  });
  const norm = Math.hypot(...values);
  canvas.dataset.norm = norm;
  canvas.dataset.values = values.length;
  return norm;
}

function expertRow(x, hidden, scale, mergedId) {
  const li = document.createElement('li');
  li.dataset.name = x.name;
  li.dataset.weight = x.weight;
  li.dataset.entropy = x.entropy;
  li.dataset.topId = x.topId;
  const agrees = x.topId === mergedId;
  li.classList.toggle('agrees', agrees);
  const name = document.createElement('span');
  name.className = 'name';
  name.textContent = x.name;
  const bar = document.createElement('span');
  bar.className = 'bar';
  bar.style.setProperty('--p', x.weight);
  const weight = document.createElement('span');
  weight.className = 'p';
  weight.textContent = `${(x.weight * 100).toFixed(1)}%`;
  const own = document.createElement('span');
  own.className = 'own';
  own.textContent = `own: ${visible(x.topText)}`;
  own.title = agrees ? 'agrees with the merged choice' : 'differs from the merged choice';
  const entropy = document.createElement('span');
  entropy.className = 'entropy';
  entropy.textContent = `H ${x.entropy.toFixed(2)}`;
  entropy.title = 'entropy of its own next-character distribution, in nats';
  const canvas = document.createElement('canvas');
  canvas.className = 'hidden-state';
  const norm = drawStrip(canvas, hidden, scale);
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', `${x.name}'s hidden state: ${hidden.length} values, norm ${norm.toFixed(1)}`);
  li.append(name, bar, weight, own, entropy, canvas);
  return li;
}

function showStep(index) {
  const step = steps[index];
  if (!step) return;
  const width = step.hidden.length / step.experts.length;
  const rows = step.experts.map((_, i) => step.hidden.subarray(i * width, (i + 1) * width));
  const merged = new Float32Array(width);
  step.experts.forEach((x, i) => rows[i].forEach((v, d) => { merged[d] += x.weight * v; }));
  // One scale per step: the 98th percentile of |value|, so one huge dimension does not wash
  // out the rest.
  const magnitudes = Array.from(step.hidden, Math.abs).sort((a, b) => a - b);
  const scale = magnitudes[Math.floor(0.98 * (magnitudes.length - 1))] || 1;

  $('step-label').textContent = `${index + 1} of ${steps.length}`;
  $('merged').textContent = visible(step.text);
  $('merged').dataset.id = step.id;
  $('step-beta').textContent = String(step.beta);
  for (const el of $('output').querySelectorAll('.current')) el.classList.remove('current');
  $('output').querySelector(`[data-pos="${step.pos}"]`)?.classList.add('current');
  const items = step.experts.map((x, i) => expertRow(x, rows[i], scale, step.id));
  const sum = document.createElement('li');
  sum.className = 'sum';
  const label = document.createElement('span');
  label.className = 'name';
  label.textContent = 'merged';
  const canvas = document.createElement('canvas');
  canvas.className = 'hidden-state';
  canvas.id = 'merged-hidden';
  canvas.setAttribute('role', 'img');
  const norm = drawStrip(canvas, merged, scale);
  canvas.setAttribute('aria-label', `the merged hidden state: ${width} values, norm ${norm.toFixed(1)}`);
  sum.append(label, canvas);
  $('experts').replaceChildren(...items, sum);
}

async function generate() {
  if (running || !council) return;
  clearError();
  let options, promptIds;
  try {
    options = {
      ...samplingInputs(),
      beta: betaInput(),
    };
    promptIds = council.encode($('prompt').value);
  } catch (e) {
    showError(e);
    return;
  }

  tokens = promptIds.map((id) => ({ id, text: council.decode([id]) }));
  steps = [];
  $('output').replaceChildren(...tokens.map((t, pos) => tokenSpan(t, pos, null)));
  $('experts').replaceChildren();
  for (const id of ['prefill', 'first-token', 'tokens-per-second', 'token-count', 'stop-reason', 'merged']) {
    $(id).textContent = '–';
  }
  delete $('stop-reason').dataset.reason;
  $('step-label').textContent = '–';
  $('step').disabled = true;
  stopRequested = false;
  setRunning(true);
  setState('generating', 'Generating…');

  let firstMs = 0;
  options.onStep = (step) => {
    const slider = $('step');
    // The panel follows the newest step unless the reader has moved the slider back.
    const followLatest = slider.disabled || slider.value === slider.max;
    const pos = tokens.length;
    tokens.push({ id: step.id, text: step.text });
    steps.push({ ...step, pos });
    $('output').append(tokenSpan(tokens[pos], pos, step));
    if (step.index === 0) {
      firstMs = step.elapsedMs;
      $('first-token').textContent = `${firstMs.toFixed(0)} ms`;
    } else {
      $('tokens-per-second').textContent = (step.index * 1000 / (step.elapsedMs - firstMs)).toFixed(1);
    }
    $('token-count').textContent = String(steps.length);
    slider.max = String(steps.length - 1);
    slider.disabled = false;
    if (followLatest) {
      slider.value = slider.max;
      showStep(steps.length - 1);
    }
    return !stopRequested;
  };

  try {
    const result = await council.generate($('prompt').value, options);
    $('prefill').textContent = `${result.prefillMs.toFixed(1)} ms`;
    if (steps.length > 1) $('tokens-per-second').textContent = result.tokensPerSecond.toFixed(1);
    $('stop-reason').textContent = STOP_REASONS[result.stopReason] ?? result.stopReason;
    $('stop-reason').dataset.reason = result.stopReason;
    setState('done', `Done: ${result.ids.length} tokens`);
  } catch (e) {
    showError(e);
  } finally {
    setRunning(false);
  }
}

/** The slider and the number box show one β; a valid one reaches a running council at once. */
function syncBeta(from) {
  if (from === 'beta-range') $('beta').value = $('beta-range').value;
  else $('beta-range').value = $('beta').value;
  try {
    council?.setBeta(betaInput());
    if ($('error').textContent.startsWith('β')) {
      clearError();
      if (running) setState('generating', 'Generating…');
      else setState('ready', 'Ready');
    }
  } catch (e) {
    showError(e);
  }
}

async function start() {
  const backend = params.get('backend') ?? 'auto';
  if (!['auto', 'webgpu', 'cpu'].includes(backend)) {
    throw new Error(`?backend= must be auto, webgpu or cpu, not "${backend}"`);
  }
  const experts = params.has('experts') ? params.get('experts').split(',') : EXPERTS;
  forge = await createForge({ backend });
  showDevice(forge.device, 'WebGPU, all four experts on this GPU');
  council = await forge.loadCouncil(COUNCIL_URL, { experts, onProgress: loadProgress() });
  $('load-progress').hidden = true;
  showCouncil(council.info);
  setRunning(false);
  setState('ready', 'Ready');
}

onSubmit('prompt-form', 'prompt-form', 'generate', generate);
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && running) stopRequested = true;
});
$('stop').addEventListener('click', () => { stopRequested = true; });
$('step').addEventListener('input', () => showStep(Number($('step').value)));
for (const id of ['beta-range', 'beta']) $(id).addEventListener('input', () => syncBeta(id));
window.addEventListener('pagehide', () => {
  council?.dispose();
  forge?.dispose();
});

start().catch(showError);
