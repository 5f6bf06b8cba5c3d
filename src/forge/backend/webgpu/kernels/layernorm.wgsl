// One workgroup per row: mean, then the variance about it (two passes, as the CPU reference).
struct Params { rows: u32, c: u32, eps: f32, off_out: u32, off_x: u32, off_w: u32, off_b: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

#include "lib_reduce_sum"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }  // uniform per workgroup, so the barriers stay uniform
  let xr = p.off_x + row * p.c;
  var s = 0.0;
  for (var i = li; i < p.c; i += 256u) { s += x[xr + i]; }
  let mean = reduce_sum(li, s) / f32(p.c);
  var q = 0.0;
  for (var i = li; i < p.c; i += 256u) { let d = x[xr + i] - mean; q += d * d; }
  let rstd = 1.0 / sqrt(reduce_sum(li, q) / f32(p.c) + p.eps);
  let orow = p.off_out + row * p.c;
  for (var i = li; i < p.c; i += 256u) {
    out[orow + i] = (x[xr + i] - mean) * rstd * w[p.off_w + i] + b[p.off_b + i];
  }
}
