// ops::attention_prefill. `append` copies the k, v of qkv [t, 3c] (rows [q | k | v]) into the
// caches [n_head, capacity, d] at rows [pos, pos + t); `main` then writes, for each query row i,
// softmax(alpha · q·Kᵀ)·V over cache rows [0, pos + i] into out [t, c] (heads merged).
//
// `main` is a flash attention: one workgroup per (BR query rows, head) walks the keys in tiles of
// BC with an online softmax, so no [t, pos + t] scores ever reach memory. Each tile is two small
// matmuls through workgroup memory, each of the 128 invocations holding a register tile:
// S = Q·Kᵀ as BR/16 rows × BC/8 keys, then O += P·V as BR/8 rows × 4 dims. The next tile's
// keys and values are read into registers while this one is computed. (One row per invocation,
// with q and the whole output row in registers, ran 3× slower than the unfused kernels on an
// H200.) The backend prepends `const D = <head size>u;` (a multiple of 4 up to 64) and the tile
// sizes BR (32) and BC (32, or 16 where the device's workgroup memory is short).
struct Params {
  n_head: u32, capacity: u32, pos: u32, t: u32,
  off_qkv: u32, off_k: u32, off_v: u32, off_out: u32,
  alpha: f32, blocks: u32, pad0: u32, pad1: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> cache_k: array<f32>;
@group(0) @binding(3) var<storage, read_write> cache_v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const WG = 128u;
const RS = BR / 16u;   // S rows per invocation (16 row groups × 8 key columns)
const RO = BR / 8u;    // O rows per invocation (8 row groups × 16 vec4 columns)
const SPR = WG / BR;   // invocations per row for the softmax statistics
const SLOTS = (BC * D4 + WG - 1u) / WG;  // vec4s of a key (or value) tile each invocation loads
const D4 = D / 4u;
const KPT = BC / 8u;  // keys per invocation in S: tc, tc + 8, ...
const BC4 = BC / 4u;
const NEG = -3.402823e38;

var<workgroup> qs: array<vec4f, BR * D4>;  // [d / 4][row]: a warp's rows are adjacent
var<workgroup> kvs: array<vec4f, BC * D4>;  // K as [d / 4][key], then V as [key][d / 4]
var<workgroup> ps: array<vec4f, BR * BC4>;  // scores, then probabilities, [row][key / 4]
var<workgroup> red_max: array<f32, WG>;
var<workgroup> red_sum: array<f32, WG>;
var<workgroup> row_max: array<f32, BR>;
var<workgroup> row_sum: array<f32, BR>;
var<workgroup> row_scale: array<f32, BR>;  // exp(old max − new max), applied to O

@compute @workgroup_size(256)
fn append(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let c = p.n_head * D;
  let e = gid.x + gid.y * nwg.x * 256u;
  if (e >= p.t * c) { return; }
  let row = e / c;
  let col = e % c;
  let dst = ((col / D) * p.capacity + p.pos + row) * D + col % D;
  cache_k[p.off_k + dst] = qkv[p.off_qkv + row * 3u * c + c + col];
  cache_v[p.off_v + dst] = qkv[p.off_qkv + row * 3u * c + 2u * c + col];
}

/// This invocation's vec4s of the key and value tile starting at row k0 (e = li + WG·n is key
/// e / D4, dims 4·(e % D4)..). Rows past last_key may hold anything: zeros keep their (masked)
/// products finite.
fn fetch(k: ptr<function, array<vec4f, SLOTS>>, v: ptr<function, array<vec4f, SLOTS>>, k0: u32,
         last_key: u32, keys: u32, values: u32, li: u32) {
  for (var n = 0u; n < SLOTS; n++) {
    let e = li + WG * n;
    let row = k0 + e / D4;
    var kv = vec4f(0.0);
    var vv = vec4f(0.0);
    if (e < BC * D4 && row <= last_key) {
      let at = row * D + 4u * (e % D4);
      kv = vec4f(cache_k[keys + at], cache_k[keys + at + 1u], cache_k[keys + at + 2u],
                 cache_k[keys + at + 3u]);
      vv = vec4f(cache_v[values + at], cache_v[values + at + 1u], cache_v[values + at + 2u],
                 cache_v[values + at + 3u]);
    }
    (*k)[n] = kv;
    (*v)[n] = vv;
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let h = wid.y;
  let first = (p.blocks - 1u - wid.x) * BR;  // the longest rows first: the grid's tail is short
  let last_key = p.pos + min(first + BR, p.t) - 1u;  // the last key any row of the block sees
  let c = p.n_head * D;
  let keys = p.off_k + h * p.capacity * D;
  let values = p.off_v + h * p.capacity * D;

  // Q, rows past t repeating the last (they are computed and never written).
  for (var e = li; e < BR * D4; e += WG) {
    let row = min(first + e / D4, p.t - 1u);
    let at = p.off_qkv + row * 3u * c + h * D + 4u * (e % D4);
    qs[(e % D4) * BR + e / D4] = vec4f(qkv[at], qkv[at + 1u], qkv[at + 2u], qkv[at + 3u]);
  }
  if (li < BR) {
    row_max[li] = NEG;
    row_sum[li] = 0.0;
  }
  // S: rows RS·tr + a; keys tc + 8·u. Softmax statistics: row sr, keys of part sq of SPR.
  let tr = li / 8u;
  let tc = li % 8u;
  let sr = li / SPR;
  let sq = li % SPR;
  // O: rows RO·og + r, dims 4·od .. 4·od + 3.
  let og = li / 16u;
  let od = li % 16u;
  var o: array<vec4f, RO>;

  // The next tile's keys and values are read into registers while this one is computed.
  var next_k: array<vec4f, SLOTS>;
  var next_v: array<vec4f, SLOTS>;
  fetch(&next_k, &next_v, 0u, last_key, keys, values, li);
  for (var k0 = 0u; k0 <= last_key; k0 += BC) {
    workgroupBarrier();
    for (var n = 0u; n < SLOTS; n++) {
      let e = li + WG * n;
      if (e < BC * D4) { kvs[(e % D4) * BC + e / D4] = next_k[n]; }
    }
    workgroupBarrier();

    // Zeroed by hand: a var declared in a loop body kept the last iteration's values on
    // lavapipe.
    var sc: array<f32, RS * KPT>;
    for (var x = 0u; x < RS * KPT; x++) { sc[x] = 0.0; }
    for (var i = 0u; i < D4; i++) {
      var k: array<vec4f, KPT>;
      for (var u = 0u; u < KPT; u++) { k[u] = kvs[i * BC + tc + 8u * u]; }
      for (var a = 0u; a < RS; a++) {
        let q = qs[i * BR + RS * tr + a];
        for (var u = 0u; u < KPT; u++) {
          let x = a * KPT + u;
          sc[x] = fma(q.x, k[u].x, fma(q.y, k[u].y, fma(q.z, k[u].z, fma(q.w, k[u].w, sc[x]))));
        }
      }
    }
    for (var a = 0u; a < RS; a++) {
      let row = RS * tr + a;
      let limit = p.pos + min(first + row, p.t - 1u);
      for (var u = 0u; u < KPT; u++) {
        let key = tc + 8u * u;
        ps[row * BC4 + key / 4u][key % 4u] = select(NEG, p.alpha * sc[a * KPT + u], k0 + key <= limit);
      }
    }
    workgroupBarrier();

    // V into kvs (its K reads are done) while the row maxima are reduced.
    for (var n = 0u; n < SLOTS; n++) {
      let e = li + WG * n;
      if (e < BC * D4) { kvs[e] = next_v[n]; }
    }
    fetch(&next_k, &next_v, k0 + BC, last_key, keys, values, li);
    var local_max = NEG;
    for (var j = sq * BC4 / SPR; j < (sq + 1u) * BC4 / SPR; j++) {
      let x = ps[sr * BC4 + j];
      local_max = max(local_max, max(max(x.x, x.y), max(x.z, x.w)));
    }
    red_max[li] = local_max;
    workgroupBarrier();

    let old_max = row_max[sr];
    var new_max = old_max;
    for (var x = 0u; x < SPR; x++) { new_max = max(new_max, red_max[SPR * sr + x]); }
    var local_sum = 0.0;
    for (var j = sq * BC4 / SPR; j < (sq + 1u) * BC4 / SPR; j++) {
      // Masked scores are NEG: exp(NEG − new_max) is 0 (key 0 is visible, so new_max is real).
      let w = exp(ps[sr * BC4 + j] - vec4f(new_max));
      ps[sr * BC4 + j] = w;
      local_sum += (w.x + w.y) + (w.z + w.w);
    }
    red_sum[li] = local_sum;
    workgroupBarrier();

    if (sq == 0u) {
      let scale = exp(old_max - new_max);
      var tile_sum = 0.0;
      for (var x = 0u; x < SPR; x++) { tile_sum += red_sum[li + x]; }
      row_scale[sr] = scale;
      row_max[sr] = new_max;
      row_sum[sr] = row_sum[sr] * scale + tile_sum;
    }
    workgroupBarrier();

    if (od < D4) {
      for (var r = 0u; r < RO; r++) { o[r] *= row_scale[RO * og + r]; }
      for (var j = 0u; j < BC4; j++) {
        let v0 = kvs[(4u * j) * D4 + od];
        let v1 = kvs[(4u * j + 1u) * D4 + od];
        let v2 = kvs[(4u * j + 2u) * D4 + od];
        let v3 = kvs[(4u * j + 3u) * D4 + od];
        for (var r = 0u; r < RO; r++) {
          let w = ps[(RO * og + r) * BC4 + j];
          o[r] = fma(vec4f(w.x), v0, o[r]);
          o[r] = fma(vec4f(w.y), v1, o[r]);
          o[r] = fma(vec4f(w.z), v2, o[r]);
          o[r] = fma(vec4f(w.w), v3, o[r]);
        }
      }
    }
  }

  workgroupBarrier();
  if (od < D4) {
    for (var r = 0u; r < RO; r++) {
      let row = first + RO * og + r;
      if (row < p.t) {
        let v = o[r] / row_sum[RO * og + r];
        let at = p.off_out + row * c + h * D + 4u * od;
        out[at] = v.x;
        out[at + 1u] = v.y;
        out[at + 2u] = v.z;
        out[at + 3u] = v.w;
      }
    }
  }
}
