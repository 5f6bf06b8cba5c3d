// out = alpha · op(a) · op(b) + bias, one BM×BN tile of out per workgroup and TM×TN per thread
// (register blocking), BK-deep tiles of a and b staged in workgroup memory. The host prepends
// `const BM/BN/BK/TM/TN` (TM, TN multiples of 4) so one source serves every tile shape. Batch
// rides in z; a shared (rank-2) b has batch stride 0. Offsets are elements into each binding's
// window. Epilogue: flag 8 adds out's old contents (a residual add, or a later chunk of a
// k-split product, which then has no bias flag); the host's `const GELU` applies the GELU last
// (a constant, not a flag: see matmul_kernel in matmul.cpp).
#include "lib_gelu"
struct Params {
  m: u32, n: u32, k: u32, flags: u32,  // flags: 1 trans_a, 2 trans_b, 4 bias, 8 accumulate
  lda: u32, ldb: u32, ldo: u32, alpha: f32,
  off_a: u32, off_b: u32, off_out: u32, off_bias: u32,
  stride_a: u32, stride_b: u32, stride_out: u32, split_k_len: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const WX = BN / TN;  // threads along n
const WY = BM / TM;  // threads along m
const THREADS = WX * WY;
// Tiles are [kk][mm] rows of vec4, so the inner loop reads four values per load. One vec4 of
// padding per row keeps rows 16-byte aligned and spreads the k-major tile stores over all banks.
const AS4 = BM / 4u + 1u;
const BS4 = BN / 4u + 1u;
var<workgroup> As: array<vec4<f32>, BK * AS4>;
var<workgroup> Bs: array<vec4<f32>, BK * BS4>;

// Each thread stages LA elements of the a tile and LB of the b tile (the host checks these
// divide evenly).
const LA = BM * BK / THREADS;
const LB = BN * BK / THREADS;

// Tile element e (consecutive threads walk the operand's contiguous dimension, so loads
// coalesce whichever way it is transposed); out-of-range elements are 0.
fn load_a(base: u32, m0: u32, k0: u32, e: u32, trans: bool) -> f32 {
  var mm: u32;
  var kk: u32;
  if (trans) { kk = e / BM; mm = e % BM; } else { mm = e / BK; kk = e % BK; }
  let gm = m0 + mm;
  let gk = k0 + kk;
  if (gm >= p.m || gk >= p.k) { return 0.0; }
  if (trans) { return a[base + gk * p.lda + gm]; }
  return a[base + gm * p.lda + gk];
}

fn load_b(base: u32, n0: u32, k0: u32, e: u32, trans: bool) -> f32 {
  var nn: u32;
  var kk: u32;
  if (trans) { nn = e / BK; kk = e % BK; } else { kk = e / BN; nn = e % BN; }
  let gn = n0 + nn;
  let gk = k0 + kk;
  if (gn >= p.n || gk >= p.k) { return 0.0; }
  if (trans) { return b[base + gn * p.ldb + gk]; }
  return b[base + gk * p.ldb + gn];
}

@compute @workgroup_size(WX, WY, 1)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let trans_a = (p.flags & 1u) != 0u;
  let trans_b = (p.flags & 2u) != 0u;
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let base_a = p.off_a + wid.z * p.stride_a;
  let base_b = p.off_b + wid.z * p.stride_b;
  // acc[(ci·4 + i)·TN/4 + cj] holds rows ci·4WY + 4·lid.y + i, columns cj·4WX + 4·lid.x + 0..3:
  // each thread owns 4-wide runs spread over the tile, so a warp's loads and stores stay dense.
  var acc: array<vec4<f32>, TM * TN / 4u>;
  // Software pipelining: the next tile's global loads are issued into registers before this
  // tile's arithmetic, so their latency hides behind it.
  var ra: array<f32, LA>;
  var rb: array<f32, LB>;
  for (var r = 0u; r < LA; r++) { ra[r] = load_a(base_a, m0, 0u, li + r * THREADS, trans_a); }
  for (var r = 0u; r < LB; r++) { rb[r] = load_b(base_b, n0, 0u, li + r * THREADS, trans_b); }
  for (var k0 = 0u; k0 < p.k; k0 += BK) {
    for (var r = 0u; r < LA; r++) {
      let e = li + r * THREADS;
      var mm: u32;
      var kk: u32;
      if (trans_a) { kk = e / BM; mm = e % BM; } else { mm = e / BK; kk = e % BK; }
      As[kk * AS4 + mm / 4u][mm % 4u] = ra[r];
    }
    for (var r = 0u; r < LB; r++) {
      let e = li + r * THREADS;
      var nn: u32;
      var kk: u32;
      if (trans_b) { nn = e / BK; kk = e % BK; } else { kk = e / BN; nn = e % BN; }
      Bs[kk * BS4 + nn / 4u][nn % 4u] = rb[r];
    }
    workgroupBarrier();
    let next = k0 + BK;
    if (next < p.k) {
      for (var r = 0u; r < LA; r++) { ra[r] = load_a(base_a, m0, next, li + r * THREADS, trans_a); }
      for (var r = 0u; r < LB; r++) { rb[r] = load_b(base_b, n0, next, li + r * THREADS, trans_b); }
    }
    for (var kk = 0u; kk < BK; kk++) {
      var ar: array<vec4<f32>, TM / 4u>;
      var br: array<vec4<f32>, TN / 4u>;
      for (var c = 0u; c < TM / 4u; c++) { ar[c] = As[kk * AS4 + c * WY + lid.y]; }
      for (var c = 0u; c < TN / 4u; c++) { br[c] = Bs[kk * BS4 + c * WX + lid.x]; }
      for (var ci = 0u; ci < TM / 4u; ci++) {
        for (var i = 0u; i < 4u; i++) {
          let av = vec4<f32>(ar[ci][i]);
          for (var cj = 0u; cj < TN / 4u; cj++) {
            let at = (ci * 4u + i) * (TN / 4u) + cj;
            acc[at] = fma(av, br[cj], acc[at]);
          }
        }
      }
    }
    workgroupBarrier();
  }
  let base_o = p.off_out + wid.z * p.stride_out;
  let has_bias = (p.flags & 4u) != 0u;
  let accumulate = (p.flags & 8u) != 0u;
  for (var ci = 0u; ci < TM / 4u; ci++) {
    for (var i = 0u; i < 4u; i++) {
      let gm = m0 + ci * WY * 4u + lid.y * 4u + i;
      if (gm >= p.m) { continue; }
      for (var cj = 0u; cj < TN / 4u; cj++) {
        let v4 = acc[(ci * 4u + i) * (TN / 4u) + cj];
        for (var j = 0u; j < 4u; j++) {
          let gn = n0 + cj * WX * 4u + lid.x * 4u + j;
          if (gn >= p.n) { continue; }
          let at = base_o + gm * p.ldo + gn;
          var v = p.alpha * v4[j];
          if (has_bias) { v += bias[p.off_bias + gn]; }
          if (accumulate) { v += out[at]; }
          if (GELU) { v = gelu_tanh(v); }
          out[at] = v;
        }
      }
    }
  }
}
