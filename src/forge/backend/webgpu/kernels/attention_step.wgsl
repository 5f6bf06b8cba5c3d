// ops::attention_step, one workgroup per head: appends the token's k, v (from qkv [q | k | v])
// at row pos of the caches [n_head, capacity, d], then writes softmax(alpha · q·Kᵀ)·V over rows
// [0, pos] into out's slice of this head (heads merged), and the weights into probs when asked.
// Limits (checked by ops): pos + 1 ≤ MAX_LEN weights in workgroup memory, d ≤ 256.
struct Params {
  n_head: u32, d: u32, capacity: u32, pos: u32,
  off_qkv: u32, off_k: u32, off_v: u32, off_out: u32,
  off_probs: u32, has_probs: u32, alpha: f32, pad: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> cache_k: array<f32>;
@group(0) @binding(3) var<storage, read_write> cache_v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> probs: array<f32>;

const WG = 256u;
const MAX_LEN = 2048u;
var<workgroup> q: array<f32, 256>;
var<workgroup> w: array<f32, MAX_LEN>;
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let c = p.n_head * p.d;
  let length = p.pos + 1u;
  let src = p.off_qkv + h * p.d;
  let keys = p.off_k + h * p.capacity * p.d;
  let values = p.off_v + h * p.capacity * p.d;
  for (var i = li; i < p.d; i += WG) {
    q[i] = qkv[src + i];
    cache_k[keys + p.pos * p.d + i] = qkv[src + c + i];
    cache_v[values + p.pos * p.d + i] = qkv[src + 2u * c + i];
  }
  // The new rows were written by other invocations of this workgroup.
  storageBarrier();
  workgroupBarrier();

  var m = -3.402823e38;
  for (var j = li; j < length; j += WG) {
    let row = keys + j * p.d;
    var s = 0.0;
    for (var i = 0u; i < p.d; i++) { s = fma(q[i], cache_k[row + i], s); }
    s = p.alpha * s;
    w[j] = s;
    m = max(m, s);
  }
  red[li] = m;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k = k >> 1u) {
    if (li < k) { red[li] = max(red[li], red[li + k]); }
    workgroupBarrier();
  }
  m = red[0];
  workgroupBarrier();
  var sum = 0.0;
  for (var j = li; j < length; j += WG) {
    let e = exp(w[j] - m);
    w[j] = e;
    sum += e;
  }
  red[li] = sum;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k = k >> 1u) {
    if (li < k) { red[li] += red[li + k]; }
    workgroupBarrier();
  }
  let inv = 1.0 / red[0];
  workgroupBarrier();
  for (var j = li; j < length; j += WG) {
    w[j] = w[j] * inv;
    if (p.has_probs != 0u) { probs[p.off_probs + h * length + j] = w[j]; }
  }
  workgroupBarrier();

  // Weighted sum of V: `slices` invocations per output element, each over every slices-th row
  // (coalesced along d), then one invocation per element adds the slices in order.
  let slices = max(1u, WG / p.d);
  let i = li % p.d;
  let r = li / p.d;
  var acc = 0.0;
  if (r < slices) {
    for (var j = r; j < length; j += slices) { acc = fma(w[j], cache_v[values + j * p.d + i], acc); }
  }
  red[li] = acc;
  workgroupBarrier();
  for (var e = li; e < p.d; e += WG) {
    var t = 0.0;
    for (var s = 0u; s < slices; s++) { t += red[s * p.d + e]; }
    out[p.off_out + h * p.d + e] = t;
  }
}
