// What every page of the site does the same way: element lookup, the status line, the error
// box, readable probabilities and whitespace, and the backend/adapter facts of the device.

export const $ = (id) => document.getElementById(id);

/** Whitespace made visible where a token stands alone (candidate lists, cells). */
export function visible(text) {
  if (text === '') return '∅';
  return text.replace(/ /g, '␣').replace(/\n/g, '↵').replace(/\t/g, '⇥');
}

/** Probabilities as a person reads them: small ones in scientific notation, never "0.0%". */
export function percent(p) {
  if (p >= 0.001) return `${(p * 100).toFixed(1)}%`;
  if (p === 0) return '0%';
  return `${(p * 100).toExponential(1)}%`;
}

export function setState(state, text) {
  $('status').dataset.state = state;
  $('status').textContent = text;
}

export function showError(error) {
  $('error').textContent = error instanceof Error ? error.message : String(error);
  $('error').hidden = false;
  setState('error', 'Error');
}

export function clearError() {
  $('error').hidden = true;
  $('error').textContent = '';
}

/** The backend line: `webgpuLabel` says what runs on the GPU; a CPU fallback says why. */
export function showDevice(device, webgpuLabel) {
  const backend = $('backend');
  backend.dataset.backend = device.backend;
  backend.textContent = device.backend === 'webgpu' ? webgpuLabel
    : device.fallbackReason ? 'CPU (fallback)' : 'CPU';
  $('adapter').textContent = device.adapter;
  $('fallback-row').hidden = !device.fallbackReason;
  $('fallback').textContent = device.fallbackReason ?? '';
}

/**
 * A candidate as a list row of the shared bar style: its text, a bar as long as its
 * probability and the probability as a person reads it (the exact value in `data-exact`).
 */
export function candidateRow(c) {
  const li = document.createElement('li');
  li.dataset.id = c.id;
  li.dataset.probability = c.probability;
  const text = document.createElement('span');
  text.className = 'cand';
  text.textContent = visible(c.text);
  const bar = document.createElement('span');
  bar.className = 'bar';
  bar.style.setProperty('--p', c.probability);
  const p = document.createElement('span');
  p.className = 'p';
  p.textContent = percent(c.probability);
  p.dataset.exact = `p = ${c.probability.toPrecision(6)}`;
  li.append(text, bar, p);
  return li;
}

/** An onProgress(loaded, total) for forge's loaders that fills the page's load-progress bar. */
export function loadProgress() {
  const progress = $('load-progress');
  return (loaded, total) => {
    progress.max = total || 1;
    progress.value = loaded;
  };
}

/** Submitting `formId` runs `action`; Ctrl/Cmd+Enter in `keysId` submits it while `buttonId` is enabled. */
export function onSubmit(formId, keysId, buttonId, action) {
  $(formId).addEventListener('submit', (e) => {
    e.preventDefault();
    action();
  });
  $(keysId).addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      if (!$(buttonId).disabled) $(formId).requestSubmit();
    }
  });
}

function integerInput(id, name, min) {
  const value = Number($(id).value);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer ≥ ${min}`);
  return value;
}

/** The sampling fields every generating page has, checked; an Error names the first bad one. */
export function samplingInputs() {
  const temperature = Number($('temperature').value);
  if (!Number.isFinite(temperature) || temperature < 0) throw new Error('Temperature must be a number ≥ 0');
  return {
    maxTokens: integerInput('max-tokens', 'Max tokens', 1),
    greedy: $('greedy').checked,
    temperature,
    topK: integerInput('top-k', 'Top-k', 0),
    topP: 1.0,
    seed: integerInput('seed', 'Seed', 0),
  };
}
