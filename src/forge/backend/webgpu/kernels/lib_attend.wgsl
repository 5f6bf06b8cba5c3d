// One head of one token's cached attention (ops::attention_step), shared by attention_step and
// attention_steps, one workgroup of WG invocations per head. The including kernel declares the
// bindings qkv (read), cache_k, cache_v (read_write) and out.
// Limits (stated by WebGpuBackend::supports, which ops ask): pos + 1 ≤ MAX_LEN weights in
// workgroup memory, d ≤ 256.
const WG = 256u;
const MAX_LEN = 2048u;
var<workgroup> q: array<f32, 256>;
var<workgroup> w: array<f32, MAX_LEN>;
var<workgroup> red: array<f32, WG>;

// Appends the token's k and v (qkv[src + c ..] and qkv[src + 2c ..], src at this head's q) at
// row pos of the head's caches (keys, values: element of the head's row 0), then leaves
// softmax(alpha · q·Kᵀ) over rows [0, pos] in w.
fn attend_weights(li: u32, src: u32, c: u32, d: u32, keys: u32, values: u32, pos: u32,
                  alpha: f32) {
  let length = pos + 1u;
  for (var i = li; i < d; i += WG) {
    q[i] = qkv[src + i];
    cache_k[keys + pos * d + i] = qkv[src + c + i];
    cache_v[values + pos * d + i] = qkv[src + 2u * c + i];
  }
  // The new rows were written by other invocations of this workgroup.
  storageBarrier();
  workgroupBarrier();

  var m = -3.402823e38;
  for (var j = li; j < length; j += WG) {
    let row = keys + j * d;
    var s = 0.0;
    for (var i = 0u; i < d; i++) { s = fma(q[i], cache_k[row + i], s); }
    s = alpha * s;
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
  for (var j = li; j < length; j += WG) { w[j] = w[j] * inv; }
  workgroupBarrier();
}

// out[dst + e] = Σ_j w[j] · V[j, e] over rows [0, length) of the head's values: `slices`
// invocations per output element, each over every slices-th row (coalesced along d), then one
// invocation per element adds the slices in order.
fn attend_values(li: u32, d: u32, values: u32, length: u32, dst: u32) {
  let slices = max(1u, WG / d);
  let i = li % d;
  let r = li / d;
  var acc = 0.0;
  if (r < slices) {
    for (var j = r; j < length; j += slices) { acc = fma(w[j], cache_v[values + j * d + i], acc); }
  }
  red[li] = acc;
  workgroupBarrier();
  for (var e = li; e < d; e += WG) {
    var t = 0.0;
    for (var s = 0u; s < slices; s++) { t += red[s * d + e]; }
    out[dst + e] = t;
  }
}
