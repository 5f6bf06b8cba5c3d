// The m = 1 (decode) path of matmul, same Params and bindings: out[j] = alpha · Σ_p a[p]·B(p, j)
// + bias[j], with matmul.wgsl's epilogue flags. A tiled matmul would waste BM−1 of its rows here.
// Batch rides in z.
#include "lib_gelu"
struct Params {
  m: u32, n: u32, k: u32, flags: u32,
  lda: u32, ldb: u32, ldo: u32, alpha: f32,
  off_a: u32, off_b: u32, off_out: u32, off_bias: u32,
  stride_a: u32, stride_b: u32, stride_out: u32, split_k_len: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, 256>;

fn a_at(base: u32, i: u32) -> f32 {
  // a is [1, k], or [k, 1] with trans_a (then consecutive p are lda apart).
  if ((p.flags & 1u) != 0u) { return a[base + i * p.lda]; }
  return a[base + i];
}

fn finish(j: u32, sum: f32, z: u32) {
  let at = p.off_out + z * p.stride_out + j;
  var v = p.alpha * sum;
  if ((p.flags & 4u) != 0u) { v += bias[p.off_bias + j]; }
  if ((p.flags & 8u) != 0u) { v += out[at]; }
  if ((p.flags & 16u) != 0u) { v = gelu_tanh(v); }
  out[at] = v;
}

// b [k, n]: 16 columns × 16 slices of k per workgroup, so even a 768-wide decode product
// spreads over enough workgroups to fill a big GPU; each slice reads a 64-byte run of a row.
@compute @workgroup_size(16, 16, 1)
fn columns(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u,
           @builtin(num_workgroups) nwg: vec3u) {
  let j = (wid.x + wid.y * nwg.x) * 16u + lid.x;  // x·y folds a grid past 65535 groups
  let base_a = p.off_a + wid.z * p.stride_a;
  let base_b = p.off_b + wid.z * p.stride_b;
  var sum = 0.0;
  if (j < p.n) {
    for (var i = lid.y; i < p.k; i += 16u) { sum = fma(a_at(base_a, i), b[base_b + i * p.ldb + j], sum); }
  }
  let slot = lid.y * 16u + lid.x;
  partial[slot] = sum;
  workgroupBarrier();
  for (var s = 128u; s >= 16u; s = s >> 1u) {
    if (slot < s) { partial[slot] += partial[slot + s]; }
    workgroupBarrier();
  }
  if (lid.y == 0u && j < p.n) { finish(j, partial[lid.x], wid.z); }
}

// b [n, k] (trans_b, e.g. the tied LM head over wte): 8 rows × 32 lanes per workgroup.
@compute @workgroup_size(32, 8, 1)
fn rows(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let j = (wid.x + wid.y * nwg.x) * 8u + lid.y;
  let base_a = p.off_a + wid.z * p.stride_a;
  let base_b = p.off_b + wid.z * p.stride_b;
  var sum = 0.0;
  if (j < p.n) {
    for (var i = lid.x; i < p.k; i += 32u) { sum = fma(a_at(base_a, i), b[base_b + j * p.ldb + i], sum); }
  }
  let slot = lid.y * 32u + lid.x;
  partial[slot] = sum;
  workgroupBarrier();
  for (var s = 16u; s > 0u; s = s >> 1u) {
    if (lid.x < s) { partial[slot] += partial[slot + s]; }
    workgroupBarrier();
  }
  if (lid.x == 0u && j < p.n) { finish(j, partial[slot], wid.z); }
}

// b [n, k] with a short k (≤ 128): one thread per row, no reduction. Software rasterisers
// (lavapipe) pay per invocation and per barrier, and a GPU loses nothing at this size.
@compute @workgroup_size(64, 1, 1)
fn rows_short(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u,
              @builtin(num_workgroups) nwg: vec3u) {
  let j = (wid.x + wid.y * nwg.x) * 64u + lid.x;
  if (j >= p.n) { return; }
  let base_a = p.off_a + wid.z * p.stride_a;
  let row = p.off_b + wid.z * p.stride_b + j * p.ldb;
  var sum = 0.0;
  for (var i = 0u; i < p.k; i++) { sum = fma(a_at(base_a, i), b[row + i], sum); }
  finish(j, sum, wid.z);
}

// Split-k for b [k, n] (plain, not trans_b), the decode path of c_attn / c_fc / both projections:
// a 768-wide product has too few column groups to fill a big GPU, so k is cut into chunks of
// p.split_k_len rows as well. Pass 1 (columns_split): a workgroup sums 64 columns (a warp reads
// whole 128-byte lines of a row) over one chunk, 4 row slices each, into out = the scratch buffer
// [batch, splits, n] (no alpha, no bias). Pass 2 (split_reduce), with the matmul's own out:
// a = that scratch; sums the splits in order and applies alpha, bias / accumulate.
@compute @workgroup_size(64, 4, 1)
fn columns_split(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u,
                 @builtin(num_workgroups) nwg: vec3u) {
  let j = wid.x * 64u + lid.x;
  let k0 = wid.y * p.split_k_len;
  let k1 = min(p.k, k0 + p.split_k_len);
  let base_a = p.off_a + wid.z * p.stride_a;
  let base_b = p.off_b + wid.z * p.stride_b;
  var s0 = 0.0;
  var s1 = 0.0;
  if (j < p.n) {
    var i = k0 + lid.y;
    for (; i + 4u < k1; i += 8u) {
      s0 = fma(a_at(base_a, i), b[base_b + i * p.ldb + j], s0);
      s1 = fma(a_at(base_a, i + 4u), b[base_b + (i + 4u) * p.ldb + j], s1);
    }
    if (i < k1) { s0 = fma(a_at(base_a, i), b[base_b + i * p.ldb + j], s0); }
  }
  let slot = lid.y * 64u + lid.x;
  partial[slot] = s0 + s1;
  workgroupBarrier();
  if (lid.y == 0u && j < p.n) {
    let v = (partial[lid.x] + partial[64u + lid.x]) + (partial[128u + lid.x] + partial[192u + lid.x]);
    out[p.off_out + (wid.z * nwg.y + wid.y) * p.n + j] = v;
  }
}

@compute @workgroup_size(256, 1, 1)
fn split_reduce(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u,
                @builtin(num_workgroups) nwg: vec3u) {
  let j = (wid.x + wid.y * nwg.x) * 256u + lid.x;
  if (j >= p.n) { return; }
  let splits = (p.k + p.split_k_len - 1u) / p.split_k_len;
  let row = p.off_a + wid.z * splits * p.n + j;
  var sum = 0.0;
  for (var s = 0u; s < splits; s++) { sum += a[row + s * p.n]; }
  finish(j, sum, wid.z);
}
