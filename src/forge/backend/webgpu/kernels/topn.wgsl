// One workgroup per row: the k largest, descending, ties by lower index first (as
// cpu::ref::topn). Pass q picks the best element ordered after pick q−1 in (−value, index)
// order, so k passes of a max-reduction need no sort and no scratch memory.
struct Params { rows: u32, n: u32, k: u32, off_ids: u32, off_values: u32, off_x: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> values: array<f32>;

var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;

const NONE = 0xffffffffu;

// Is (v, i) before (bv, bi) in descending-value, ascending-index order?
fn before(v: f32, i: u32, bv: f32, bi: u32) -> bool {
  return bi == NONE || v > bv || (v == bv && i < bi);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let xr = p.off_x + row * p.n;
  var prev_v = 0.0;
  var prev_i = NONE;
  for (var q = 0u; q < p.k; q++) {
    var v = 0.0;
    var idx = NONE;
    for (var j = li; j < p.n; j += 256u) {
      let xv = x[xr + j];
      let after_prev = prev_i == NONE || xv < prev_v || (xv == prev_v && j > prev_i);
      if (after_prev && before(xv, j, v, idx)) { v = xv; idx = j; }
    }
    best_v[li] = v;
    best_i[li] = idx;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
      if (li < s && best_i[li + s] != NONE && before(best_v[li + s], best_i[li + s], best_v[li], best_i[li])) {
        best_v[li] = best_v[li + s];
        best_i[li] = best_i[li + s];
      }
      workgroupBarrier();
    }
    prev_v = best_v[0];
    prev_i = best_i[0];
    if (li == 0u) {
      ids[p.off_ids + row * p.k + q] = prev_i;
      values[p.off_values + row * p.k + q] = prev_v;
    }
    workgroupBarrier();
  }
}
