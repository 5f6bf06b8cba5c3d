// ops::attention_prefill: for each query row i of qkv [t, 3c] (rows [q | k | v]), out [t, c]
// (heads merged) gets softmax(alpha · q·Kᵀ)·V over keys [0, pos + i], where keys below pos are
// the caches' [n_head, capacity, d] rows and the rest are qkv's own; qkv's k, v land in the
// caches' rows [pos, pos + t). Keys at pos and past are read from qkv, so no workgroup waits for
// another's cache writes: the chunk-0 workgroup of each block writes its block's rows.
//
// `main` is a flash attention: one workgroup per (BR query rows, chunk of keys, head) walks its
// keys in tiles of BC with an online softmax, so no [t, pos + t] scores ever reach memory. Each
// tile is two small matmuls through workgroup memory, each of the 128 invocations holding a
// register tile: S = Q·Kᵀ as BR/16 rows × BC/8 keys, then O += P·V as BR/8 rows × 4 dims. The
// next tile's keys and values are read into registers while this one is computed. (One row per
// invocation, with q and the output row in registers, was slower than the unfused kernels:
// docs/runs/webgpu-kernels.)
//
// Keys are cut into chunks of p.chunk (a multiple of BC) so that the last rows' workgroups, which
// see the most keys, are not the whole dispatch's critical path. A block whose keys fit one chunk
// writes out itself; otherwise each chunk writes its unnormalised rows and their (max, sum) to
// `parts`, and `combine` merges the chunks of each row. The backend prepends `const D = <head
// size>u;` (a multiple of 4 up to 64) and the tile sizes BR (32) and BC (32, or 16 where the
// device's workgroup memory is short). Every binding is read and written as vec4s, so offsets
// are in vec4s too (a quarter of the scalar loads, and of the bounds clamps Dawn adds to each).
struct Params {
  n_head: u32, capacity: u32, pos: u32, t: u32,
  off_qkv: u32, off_k: u32, off_v: u32, off_out: u32,
  alpha: f32, blocks: u32, chunk: u32, chunks: u32,  // chunks: per block at most
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> cache_k: array<vec4f>;
@group(0) @binding(3) var<storage, read_write> cache_v: array<vec4f>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4f>;
// Chunk (h, block, j) = part (h·blocks + block)·chunks + j: its rows [part·BR + r][D / 4], then
// after all of those, each row's (max, sum, 0, 0).
@group(0) @binding(5) var<storage, read_write> parts: array<vec4f>;

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

/// Where key (value: + c/4) `key` of head h starts in qkv, for keys at pos and past.
fn qkv_key(key: u32, h: u32) -> u32 {
  let c4 = p.n_head * D4;
  return p.off_qkv + (key - p.pos) * 3u * c4 + c4 + h * D4;
}

/// This invocation's vec4s of the key and value tile starting at key k0 (e = li + WG·n is key
/// e / D4, dims 4·(e % D4)..). Keys past last_key may hold anything: zeros keep their (masked)
/// products finite.
fn fetch(k: ptr<function, array<vec4f, SLOTS>>, v: ptr<function, array<vec4f, SLOTS>>, k0: u32,
         last_key: u32, h: u32, li: u32) {
  let c4 = p.n_head * D4;
  for (var n = 0u; n < SLOTS; n++) {
    let e = li + WG * n;
    let key = k0 + e / D4;
    var kv = vec4f(0.0);
    var vv = vec4f(0.0);
    if (e < BC * D4 && key <= last_key) {
      if (key < p.pos) {
        let at = (h * p.capacity + key) * D4 + e % D4;
        kv = cache_k[p.off_k + at];
        vv = cache_v[p.off_v + at];
      } else {
        let at = qkv_key(key, h) + e % D4;
        kv = qkv[at];
        vv = qkv[at + c4];
      }
    }
    (*k)[n] = kv;
    (*v)[n] = vv;
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let h = wid.z;
  let block = p.blocks - 1u - wid.x;  // the longest rows first: the grid's tail is short
  let first = block * BR;
  let last_key = p.pos + min(first + BR, p.t) - 1u;  // the last key any row of the block sees
  let k_begin = wid.y * p.chunk;
  if (k_begin > last_key) { return; }  // the block's keys end before this chunk
  let k_end = min(last_key, k_begin + p.chunk - 1u);
  let c4 = p.n_head * D4;

  // Q, rows past t repeating the last (they are computed and never written).
  for (var e = li; e < BR * D4; e += WG) {
    let row = min(first + e / D4, p.t - 1u);
    qs[(e % D4) * BR + e / D4] = qkv[p.off_qkv + row * 3u * c4 + h * D4 + e % D4];
  }
  if (wid.y == 0u) {
    for (var e = li; e < BR * D4; e += WG) {
      let row = first + e / D4;
      if (row < p.t) {
        let at = qkv_key(p.pos + row, h) + e % D4;
        let dst = (h * p.capacity + p.pos + row) * D4 + e % D4;
        cache_k[p.off_k + dst] = qkv[at];
        cache_v[p.off_v + dst] = qkv[at + c4];
      }
    }
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
  fetch(&next_k, &next_v, k_begin, k_end, h, li);
  for (var k0 = k_begin; k0 <= k_end; k0 += BC) {
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
    fetch(&next_k, &next_v, k0 + BC, k_end, h, li);
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
    // Masked scores are NEG, so exp(NEG − new_max) is 0 once the row has seen a key; in a chunk
    // past key 0 a row may not have yet, and its NEG − NEG must not count as a weight.
    let seen = new_max > NEG;
    var local_sum = 0.0;
    for (var j = sq * BC4 / SPR; j < (sq + 1u) * BC4 / SPR; j++) {
      let w = select(vec4f(0.0), exp(ps[sr * BC4 + j] - vec4f(new_max)), seen);
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
  let whole = k_begin == 0u && k_end == last_key;
  let part = (h * p.blocks + block) * p.chunks + wid.y;
  if (od < D4) {
    for (var r = 0u; r < RO; r++) {
      let row = RO * og + r;
      if (first + row >= p.t) { continue; }
      if (whole) {
        out[p.off_out + (first + row) * c4 + h * D4 + od] = o[r] / row_sum[row];
      } else {
        parts[(part * BR + row) * D4 + od] = o[r];
      }
    }
  }
  if (!whole && li < BR && first + li < p.t) {
    parts[p.n_head * p.blocks * p.chunks * BR * D4 + part * BR + li] =
        vec4f(row_max[li], row_sum[li], 0.0, 0.0);
  }
}

/// out for the rows whose keys `main` split into chunks: O = Σ_j o_j · exp(m_j − M) over
/// Σ_j s_j · exp(m_j − M), M the largest chunk maximum. One invocation per (row, head, 4 dims).
@compute @workgroup_size(64)
fn combine(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = gid.x + gid.y * nwg.x * 64u;
  if (e >= p.t * p.n_head * D4) { return; }
  let row = e / (p.n_head * D4);
  let h = (e / D4) % p.n_head;
  let d4 = e % D4;
  let block = row / BR;
  let last_key = p.pos + min(block * BR + BR, p.t) - 1u;
  let chunks = last_key / p.chunk + 1u;
  if (chunks == 1u) { return; }  // `main` wrote it
  let stats = p.n_head * p.blocks * p.chunks * BR * D4;
  let part0 = (h * p.blocks + block) * p.chunks;
  let r = row % BR;
  var m = NEG;
  for (var j = 0u; j < chunks; j++) { m = max(m, parts[stats + (part0 + j) * BR + r].x); }
  var o = vec4f(0.0);
  var sum = 0.0;
  for (var j = 0u; j < chunks; j++) {
    let s = parts[stats + (part0 + j) * BR + r];
    let w = exp(s.x - m);  // a chunk the row saw nothing of has (NEG, 0) and weighs 0
    o += w * parts[((part0 + j) * BR + r) * D4 + d4];
    sum += w * s.y;
  }
  out[p.off_out + row * p.n_head * D4 + h * D4 + d4] = o / sum;
}
