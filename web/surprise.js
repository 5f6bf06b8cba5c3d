// The Surprise page: one teacher-forced scoring pass over a text (forge.js Model.score, the
// runtime's forge::score_sequence), replayed as characters that flicker through the model's own
// candidates and lock after a time proportional to their surprisal. What it shows is in the DOM
// with data-* attributes (positions, ids, bits, probabilities), so tests read what a person sees.
import { createForge } from './forge.js';
import {
  $, visible, percent, setState, showError, clearError, showDevice, candidateRow, loadProgress, onSubmit,
} from './page.js';

const params = new URLSearchParams(location.search);
const TOP_K = 8;
const MS_PER_BIT = 200;    // the reveal: a character locks after bits × this …
const MAX_LOCK_MS = 3000;  // … but never later than this
const FLICKER_MS = 70;     // a new candidate this often while unlocked
const HEAT_FULL_BITS = 8;  // the colour is full at 8 bits (p = 1/256) and beyond

// Paragraphs of the State of the Union addresses; the third is from the held-out tail of the
// corpus, which the shipped model never trained on. The one-line ones score in seconds even on a
// software adapter. ?sample=N opens with paragraph N (from 0) instead of the first.
const SAMPLES = [
  {
    label: 'Lincoln, 1862',
    text: 'The dogmas of the quiet past are inadequate to the stormy present. The occasion is ' +
      'piled high with difficulty, and we must rise with the occasion. As our case is new, so ' +
      'we must think anew and act anew. We must disenthrall ourselves, and then we shall save ' +
      'our country. Fellow-citizens, we can not escape history.',
  },
  {
    label: 'Roosevelt, 1941',
    text: 'In the future days, which we seek to make secure, we look forward to a world founded ' +
      'upon four essential human freedoms. The first is freedom of speech and ' +
      'expression-everywhere in the world. The second is freedom of every person to worship ' +
      'God in his own way-everywhere in the world.',
  },
  {
    label: 'Biden, 2021 (held out: the model never saw it)',
    text: 'Folks, as I told every world leader I’ve ever met with over the years, it’s never ' +
      'ever, ever been a good bet to bet against America, and it still isn’t. We are the ' +
      'United States of America.',
  },
  { label: 'Lincoln, 1862, one line', text: 'Fellow-citizens, we can not escape history.' },
  {
    label: 'Roosevelt, 1941, one line',
    text: 'The first is freedom of speech and expression-everywhere in the world.',
  },
];

let model = null;
let scored = null;     // the last full pass: { first, positions, ms, ... }
let spans = [];        // #heat's character spans; spans[0] is the unscored first token
let animation = 0;     // requestAnimationFrame id of a running reveal
let anchor = null;     // keyboard selection: the position Shift+arrows started from
let keyRange = null;   // keyboard selection [from, to] (positions, inclusive)
let busy = false;

function setBusy(on) {
  busy = on;
  $('score').disabled = on || !model;
  $('replay').disabled = on || !scored;
  $('text').readOnly = on;
  updateRescoreButton();
}

function heat(bits) {
  return Math.min(bits / HEAT_FULL_BITS, 1);
}

function showModel(info) {
  $('model-info').textContent = `${info.layers} layers × ${info.heads} heads × ${info.width}, ` +
    `${(info.parameters / 1e6).toFixed(2)} M parameters, ${info.tokenizer} tokenizer, ` +
    `context ${info.context}`;
}

// ---- The heat map and its reveal ----

function positionOf(pos) {
  return pos > 0 ? scored.positions[pos - 1] : null;
}

function renderText() {
  const heatEl = $('heat');
  spans = [scored.first, ...scored.positions].map((token, pos) => {
    const span = document.createElement('span');
    span.className = 'ch';
    span.dataset.pos = pos;
    span.dataset.id = token.id;
    span.textContent = token.text;
    span.tabIndex = pos === 0 ? 0 : -1;
    if (pos === 0) {
      span.classList.add('first');
      span.title = 'the first character: nothing before it to predict it from';
    } else {
      span.dataset.bits = token.bits;
      span.title = `${token.bits.toFixed(2)} bits`;
    }
    return span;
  });
  heatEl.replaceChildren(...spans);
  const bits = scored.positions.reduce((s, p) => s + p.bits, 0);
  $('characters').textContent = String(spans.length);
  $('mean-bits').textContent = `${(bits / scored.positions.length).toFixed(3)} bits/character`;
  $('mean-bits').dataset.value = bits / scored.positions.length;
  const device = scored.backend === 'webgpu' ? 'WebGPU' : 'the CPU';
  $('score-ms').textContent = `${scored.ms.toFixed(0)} ms on ${device}, ${scored.windows} ` +
    `window${scored.windows === 1 ? '' : 's'}`;
}

function lock(span, pos) {
  span.classList.remove('flicker');
  span.classList.add('locked');
  span.textContent = pos === 0 ? scored.first.text : scored.positions[pos - 1].text;
  if (pos > 0) span.style.setProperty('--h', heat(scored.positions[pos - 1].bits));
}

/** One candidate of the position's top-K, drawn in proportion to its probability. */
function draw(top) {
  const total = top.reduce((s, c) => s + c.probability, 0);
  let r = Math.random() * total;
  for (const c of top) {
    r -= c.probability;
    if (r <= 0) return c.text;
  }
  return top.at(-1).text;
}

function finalFrame(revealMs) {
  animation = 0;
  spans.forEach(lock);
  $('status').dataset.finalMs = performance.now().toFixed(0);  // since the page's navigation
  $('status').dataset.revealMs = revealMs.toFixed(0);
  setState('done', 'Done');
  setBusy(false);
}

function reveal() {
  cancelAnimationFrame(animation);
  if (matchMedia('(prefers-reduced-motion: reduce)').matches) {
    finalFrame(0);
    return;
  }
  setState('revealing', 'Revealing…');
  setBusy(true);
  const lockAt = spans.map((_, pos) => (pos === 0 ? 0
    : Math.min(scored.positions[pos - 1].bits * MS_PER_BIT, MAX_LOCK_MS)));
  for (const [pos, span] of spans.entries()) {
    span.classList.remove('locked');
    span.style.removeProperty('--h');
    if (lockAt[pos] > 0) span.classList.add('flicker');
  }
  const start = performance.now();
  let flickered = -Infinity;
  const frame = (now) => {
    const elapsed = Math.max(0, now - start);  // a frame's timestamp may precede start
    const shuffle = now - flickered >= FLICKER_MS;
    if (shuffle) flickered = now;
    let open = 0;
    for (const [pos, span] of spans.entries()) {
      if (span.classList.contains('locked')) continue;
      if (elapsed >= lockAt[pos]) {
        lock(span, pos);
      } else {
        ++open;
        // A newline or tab shows as a mark while it flickers, so the lines do not jump.
        if (shuffle) span.textContent = draw(scored.positions[pos - 1].top).replace(/\n/g, '↵').replace(/\t/g, '⇥');
      }
    }
    if (open === 0) finalFrame(performance.now() - start);
    else animation = requestAnimationFrame(frame);
  };
  animation = requestAnimationFrame(frame);
}

// ---- What the model expected at one character ----

function showDetail(pos) {
  const p = positionOf(pos);
  const token = pos === 0 ? scored.first : p;
  $('detail-char').textContent = `“${visible(token.text)}” at ${pos}`;
  $('detail-panel').dataset.pos = pos;
  if (!p) {
    $('detail-bits').textContent = 'The first character: nothing before it to predict it from.';
    $('candidates').replaceChildren();
    return;
  }
  const probability = 2 ** -p.bits;
  $('detail-bits').textContent = `${p.bits.toFixed(3)} bits: the model gave it p = ${probability.toPrecision(4)}`;
  $('detail-bits').dataset.bits = p.bits;
  const rows = p.top.map((c) => {
    const li = candidateRow(c);
    li.title = `p = ${c.probability}`;
    if (c.id === p.id) li.classList.add('actual');
    return li;
  });
  if (!p.top.some((c) => c.id === p.id)) {
    const li = document.createElement('li');
    li.className = 'actual outside';
    li.textContent = `“${visible(p.text)}” itself, outside the top ${p.top.length}: ${percent(probability)}`;
    rows.push(li);
  }
  $('candidates').replaceChildren(...rows);
}

// ---- Selections and rescoring ----

function spanPos(node) {
  const el = node?.nodeType === Node.TEXT_NODE ? node.parentElement : node;
  const span = el?.closest?.('#heat .ch');
  return span ? Number(span.dataset.pos) : null;
}

/** The selected positions [from, to]: the keyboard's, else the mouse's; null under two. */
function selectedRange() {
  if (keyRange) return keyRange[1] > keyRange[0] ? keyRange : null;
  const selection = getSelection();
  if (!selection || selection.isCollapsed || !scored) return null;
  const a = spanPos(selection.anchorNode), b = spanPos(selection.focusNode);
  if (a === null || b === null) return null;
  let [from, to] = a <= b ? [a, b] : [b, a];
  // A selection ending at offset 0 of a character has not taken that character.
  const end = a <= b ? selection.focusOffset : selection.anchorOffset;
  if (end === 0 && to > from) --to;
  return to > from ? [from, to] : null;
}

function updateRescoreButton() {
  $('rescore').disabled = busy || !model || selectedRange() === null;
}

function markKeyRange() {
  for (const span of spans) span.classList.remove('selected');
  if (!keyRange) return;
  for (let pos = keyRange[0]; pos <= keyRange[1]; ++pos) spans[pos].classList.add('selected');
}

async function rescore() {
  const range = selectedRange();
  if (!range || busy) return;
  const [from, to] = range;
  const text = [scored.first, ...scored.positions].slice(from, to + 1).map((t) => t.text).join('');
  clearError();
  setBusy(true);
  setState('scoring', 'Scoring the selection…');
  try {
    const alone = await model.score(text, { topK: TOP_K });
    const before = scored.positions.slice(from, to);  // the same characters after the first
    const after = alone.positions;
    const mean = (list) => list.reduce((s, p) => s + p.bits, 0) / list.length;
    $('rescored-summary').textContent = `“${text}”: ${mean(before).toFixed(3)} bits/character ` +
      `in the text, ${mean(after).toFixed(3)} alone (the first character has nothing to go on ` +
      `either way in the selection, so it is left out of both).`;
    $('rescored-panel').dataset.from = from;
    $('rescored-panel').dataset.to = to;
    const first = document.createElement('span');
    first.className = 'ch first';
    first.textContent = alone.first.text;
    $('rescored').replaceChildren(first, ...after.map((p, i) => {
      const span = document.createElement('span');
      span.className = 'ch locked';
      span.dataset.pos = from + 1 + i;
      span.dataset.bits = p.bits;
      span.style.setProperty('--h', heat(p.bits));
      span.textContent = p.text;
      span.title = `${p.bits.toFixed(2)} bits alone, ${before[i].bits.toFixed(2)} in the text`;
      return span;
    }));
    $('rescored-table').tBodies[0].replaceChildren(...after.map((p, i) => {
      const row = document.createElement('tr');
      for (const cell of [`“${visible(p.text)}”`, before[i].bits.toFixed(3), p.bits.toFixed(3)]) {
        row.insertCell().textContent = cell;
      }
      row.dataset.delta = p.bits - before[i].bits;
      return row;
    }));
    $('rescored-panel').hidden = false;
    setState('done', 'Done');
  } catch (e) {
    showError(e);
  } finally {
    setBusy(false);
  }
}

// ---- Scoring ----

async function score() {
  if (busy || !model) return;
  clearError();
  cancelAnimationFrame(animation);
  keyRange = anchor = null;
  $('rescored-panel').hidden = true;
  setBusy(true);
  setState('scoring', 'Scoring…');
  try {
    scored = await model.score($('text').value, { topK: TOP_K });
    scored.backend = forge.device.backend;
  } catch (e) {
    scored = null;
    spans = [];
    $('heat').replaceChildren();
    $('candidates').replaceChildren();
    for (const id of ['characters', 'mean-bits', 'score-ms', 'detail-char']) $(id).textContent = '–';
    showError(e);
    setBusy(false);
    return;
  }
  renderText();
  reveal();
}

let forge = null;

async function start() {
  const backend = params.get('backend') ?? 'auto';
  if (!['auto', 'webgpu', 'cpu'].includes(backend)) {
    throw new Error(`?backend= must be auto, webgpu or cpu, not "${backend}"`);
  }
  const sample = params.get('sample') ?? '0';
  if (!/^[0-9]+$/.test(sample) || Number(sample) >= SAMPLES.length) {
    throw new Error(`?sample= must be a paragraph number from 0 to ${SAMPLES.length - 1}, not "${sample}"`);
  }
  const select = $('sample');
  select.replaceChildren(...SAMPLES.map((s, i) => new Option(s.label, i)));
  select.value = sample;
  $('text').value = SAMPLES[Number(sample)].text;
  forge = await createForge({ backend });
  showDevice(forge.device, 'WebGPU (this GPU)');
  model = await forge.loadModel('/model/', { onProgress: loadProgress() });
  $('load-progress').hidden = true;
  showModel(model.info);
  setBusy(false);
  await score();
}

function showStartError(error) {
  showError(error);
  $('load-progress').hidden = true;
  for (const id of ['backend', 'adapter', 'model-info']) {
    if ($(id).textContent === '…') $(id).textContent = 'not loaded';
  }
}

onSubmit('text-form', 'text', 'score', score);
$('sample').addEventListener('change', () => {
  $('text').value = SAMPLES[Number($('sample').value)].text;
  score();
});
$('replay').addEventListener('click', reveal);
$('rescore').addEventListener('click', rescore);
document.addEventListener('selectionchange', () => {
  if (getSelection() && !getSelection().isCollapsed) {
    keyRange = anchor = null;
    markKeyRange();
  }
  updateRescoreButton();
});

const heatEl = $('heat');
heatEl.addEventListener('mouseover', (e) => {
  const pos = spanPos(e.target);
  if (pos !== null && scored) showDetail(pos);
});
heatEl.addEventListener('focusin', (e) => {
  const pos = spanPos(e.target);
  if (pos !== null && scored) showDetail(pos);
});
// One tab stop for the whole text; arrows move between characters (a roving tabindex).
heatEl.addEventListener('keydown', (e) => {
  const pos = spanPos(document.activeElement);
  if (pos === null) return;
  const moves = { ArrowRight: pos + 1, ArrowLeft: pos - 1, Home: 0, End: spans.length - 1 };
  if (e.key in moves) {
    e.preventDefault();
    const next = Math.max(0, Math.min(spans.length - 1, moves[e.key]));
    if (e.shiftKey) {
      anchor ??= pos;
      keyRange = [Math.min(anchor, next), Math.max(anchor, next)];
    } else {
      keyRange = anchor = null;
    }
    markKeyRange();
    spans[pos].tabIndex = -1;
    spans[next].tabIndex = 0;
    spans[next].focus();
    updateRescoreButton();
  } else if (e.key === 'Enter') {
    e.preventDefault();
    rescore();
  } else if (e.key === 'Escape') {
    keyRange = anchor = null;
    markKeyRange();
    updateRescoreButton();
  }
});
window.addEventListener('pagehide', () => {
  cancelAnimationFrame(animation);
  model?.dispose();
  forge?.dispose();
});

start().catch(showStartError);
