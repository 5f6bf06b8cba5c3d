// One workgroup per row: index of the maximum, the first on ties (as cpu::ref::argmax).
struct Params { rows: u32, n: u32, off_out: u32, off_x: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let xr = p.off_x + row * p.n;
  var v = -3.402823e38;
  var idx = 0xffffffffu;
  for (var j = li; j < p.n; j += 256u) {
    let xv = x[xr + j];
    if (idx == 0xffffffffu || xv > v) { v = xv; idx = j; }  // j ascends: ties keep the first
  }
  best_v[li] = v;
  best_i[li] = idx;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s = s >> 1u) {
    if (li < s) {
      let ov = best_v[li + s];
      let oi = best_i[li + s];
      if (oi != 0xffffffffu && (best_i[li] == 0xffffffffu || ov > best_v[li] ||
                                (ov == best_v[li] && oi < best_i[li]))) {
        best_v[li] = ov;
        best_i[li] = oi;
      }
    }
    workgroupBarrier();
  }
  if (li == 0u) { out[p.off_out + row] = best_i[0]; }
}
