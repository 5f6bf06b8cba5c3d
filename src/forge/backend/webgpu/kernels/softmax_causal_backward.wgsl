// One workgroup per row of probs [b, t, s]: over the visible columns (j ≤ i mod t + offset),
// dscores = probs·(dprobs − Σ probs·dprobs); masked columns get exactly 0.
struct Params { rows: u32, t: u32, s: u32, offset: u32, off_out: u32, off_p: u32, off_g: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> probs: array<f32>;
@group(0) @binding(2) var<storage, read> dprobs: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let visible = min(p.s, row % p.t + p.offset + 1u);
  let pr = p.off_p + row * p.s;
  let gr = p.off_g + row * p.s;
  var d = 0.0;
  for (var j = li; j < visible; j += 256u) { d += probs[pr + j] * dprobs[gr + j]; }
  partial[li] = d;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) { partial[li] += partial[li + k]; }
    workgroupBarrier();
  }
  d = partial[0];
  let orow = p.off_out + row * p.s;
  for (var j = li; j < p.s; j += 256u) {
    out[orow + j] = select(0.0, probs[pr + j] * (dprobs[gr + j] - d), j < visible);
  }
}
