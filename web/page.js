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
