// LayerNorm backward, dx part: one workgroup per row recomputes mean and rstd exactly as the
// forward (two passes), writes dx = rstd·(dy·w − mean(dy·w) − x̂·mean(dy·w·x̂)), and saves
// (mean, rstd) for layernorm_backward_partials.wgsl's dγ/dβ.
struct Params { rows: u32, c: u32, eps: f32, off_x: u32, off_dy: u32, off_w: u32, off_dx: u32, off_stats: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;

#include "lib_reduce_sum"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }  // uniform per workgroup, so the barriers stay uniform
  let xr = p.off_x + row * p.c;
  let gr = p.off_dy + row * p.c;
  let inv_c = 1.0 / f32(p.c);
  var s = 0.0;
  for (var j = li; j < p.c; j += 256u) { s += x[xr + j]; }
  let mean = reduce_sum(li, s) * inv_c;
  var q = 0.0;
  for (var j = li; j < p.c; j += 256u) { let d = x[xr + j] - mean; q += d * d; }
  let rstd = 1.0 / sqrt(reduce_sum(li, q) * inv_c + p.eps);
  var sg = 0.0;
  var sgx = 0.0;
  for (var j = li; j < p.c; j += 256u) {
    let g = dy[gr + j] * w[p.off_w + j];
    sg += g;
    sgx += g * (x[xr + j] - mean) * rstd;
  }
  let mean_g = reduce_sum(li, sg) * inv_c;
  let mean_gx = reduce_sum(li, sgx) * inv_c;
  let orow = p.off_dx + row * p.c;
  for (var j = li; j < p.c; j += 256u) {
    let xhat = (x[xr + j] - mean) * rstd;
    dx[orow + j] = rstd * (dy[gr + j] * w[p.off_w + j] - mean_g - xhat * mean_gx);
  }
  if (li == 0u) {
    stats[p.off_stats + 2u * row] = mean;
    stats[p.off_stats + 2u * row + 1u] = rstd;
  }
}
