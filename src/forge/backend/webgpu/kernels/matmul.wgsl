// out = alpha · op(a) · op(b) + bias, one BM×BN tile of out per workgroup, TM×TN per thread
// (register blocking), BK-deep tiles of a and b staged in workgroup memory. The host prepends
// `const BM/BN/BK/TM/TN` so one source serves every tile shape. Batch rides in z; a shared
// (rank-2) b has batch stride 0. Offsets are elements into each binding's window.
struct Params {
  m: u32, n: u32, k: u32, flags: u32,  // flags: 1 trans_a, 2 trans_b, 4 bias, 8 accumulate
  lda: u32, ldb: u32, ldo: u32, alpha: f32,
  off_a: u32, off_b: u32, off_out: u32, off_bias: u32,
  stride_a: u32, stride_b: u32, stride_out: u32, pad: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const WX = BN / TN;  // threads along n
const WY = BM / TM;  // threads along m
const THREADS = WX * WY;

// Rows padded by one float: tile loads along k would otherwise store BM (or BN) apart, all
// into the same few banks.
const AS = BM + 1u;
const BS = BN + 1u;
var<workgroup> As: array<f32, BK * AS>;  // [kk][mm]
var<workgroup> Bs: array<f32, BK * BS>;  // [kk][nn]

@compute @workgroup_size(WX, WY, 1)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let trans_a = (p.flags & 1u) != 0u;
  let trans_b = (p.flags & 2u) != 0u;
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let base_a = p.off_a + wid.z * p.stride_a;
  let base_b = p.off_b + wid.z * p.stride_b;
  var acc: array<f32, TM * TN>;
  for (var k0 = 0u; k0 < p.k; k0 += BK) {
    // Consecutive threads walk the operand's contiguous dimension, so loads coalesce
    // whichever way it is transposed. Out-of-range elements load as 0.
    for (var e = li; e < BM * BK; e += THREADS) {
      var mm: u32;
      var kk: u32;
      if (trans_a) { kk = e / BM; mm = e % BM; } else { mm = e / BK; kk = e % BK; }
      let gm = m0 + mm;
      let gk = k0 + kk;
      var v = 0.0;
      if (gm < p.m && gk < p.k) {
        if (trans_a) { v = a[base_a + gk * p.lda + gm]; } else { v = a[base_a + gm * p.lda + gk]; }
      }
      As[kk * AS + mm] = v;
    }
    for (var e = li; e < BN * BK; e += THREADS) {
      var nn: u32;
      var kk: u32;
      if (trans_b) { nn = e / BK; kk = e % BK; } else { kk = e / BN; nn = e % BN; }
      let gn = n0 + nn;
      let gk = k0 + kk;
      var v = 0.0;
      if (gn < p.n && gk < p.k) {
        if (trans_b) { v = b[base_b + gn * p.ldb + gk]; } else { v = b[base_b + gk * p.ldb + gn]; }
      }
      Bs[kk * BS + nn] = v;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      var ar: array<f32, TM>;
      var br: array<f32, TN>;
      // Thread rows/cols are strided by WY/WX: a warp reads Bs contiguously and As broadcast.
      for (var i = 0u; i < TM; i++) { ar[i] = As[kk * AS + lid.y + i * WY]; }
      for (var j = 0u; j < TN; j++) { br[j] = Bs[kk * BS + lid.x + j * WX]; }
      for (var i = 0u; i < TM; i++) {
        for (var j = 0u; j < TN; j++) { acc[i * TN + j] = fma(ar[i], br[j], acc[i * TN + j]); }
      }
    }
    workgroupBarrier();
  }
  let base_o = p.off_out + wid.z * p.stride_out;
  let has_bias = (p.flags & 4u) != 0u;
  let accumulate = (p.flags & 8u) != 0u;  // a later chunk of a k-split product
  for (var i = 0u; i < TM; i++) {
    let gm = m0 + lid.y + i * WY;
    if (gm >= p.m) { continue; }
    for (var j = 0u; j < TN; j++) {
      let gn = n0 + lid.x + j * WX;
      if (gn >= p.n) { continue; }
      let at = base_o + gm * p.ldo + gn;
      var v = p.alpha * acc[i * TN + j];
      if (accumulate) { v += out[at]; } else if (has_bias) { v += bias[p.off_bias + gn]; }
      out[at] = v;
    }
  }
}
