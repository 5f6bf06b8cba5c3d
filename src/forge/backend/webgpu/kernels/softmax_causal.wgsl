// One workgroup per row of scores [b, t, s]: row i sees columns j ≤ i mod t + offset; the rest
// get exactly 0.
struct Params { rows: u32, t: u32, s: u32, offset: u32, off_out: u32, off_x: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let visible = min(p.s, row % p.t + p.offset + 1u);
  let xr = p.off_x + row * p.s;
  var m = -3.402823e38;
  for (var j = li; j < visible; j += 256u) { m = max(m, x[xr + j]); }
  partial[li] = m;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) { partial[li] = max(partial[li], partial[li + k]); }
    workgroupBarrier();
  }
  m = partial[0];
  workgroupBarrier();
  var sum = 0.0;
  for (var j = li; j < visible; j += 256u) { sum += exp(x[xr + j] - m); }
  partial[li] = sum;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) { partial[li] += partial[li + k]; }
    workgroupBarrier();
  }
  let inv = 1.0 / partial[0];
  let orow = p.off_out + row * p.s;
  for (var j = li; j < p.s; j += 256u) {
    out[orow + j] = select(0.0, exp(x[xr + j] - m) * inv, j < visible);
  }
}

// The same result in two reads of the row instead of three: each thread keeps a running max and
// the sum of exp(x - max) (rescaled when the max grows); one reduction of (max, sum) pairs.
var<workgroup> partial_m: array<f32, 256>;

@compute @workgroup_size(256)
fn online(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
          @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let visible = min(p.s, row % p.t + p.offset + 1u);
  let xr = p.off_x + row * p.s;
  var m = -3.402823e38;
  var sum = 0.0;
  for (var j = li; j < visible; j += 256u) {
    let v = x[xr + j];
    let mn = max(m, v);
    sum = sum * exp(m - mn) + exp(v - mn);
    m = mn;
  }
  partial_m[li] = m;
  partial[li] = sum;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) {
      let m1 = partial_m[li];
      let m2 = partial_m[li + k];
      let mn = max(m1, m2);
      partial[li] = partial[li] * exp(m1 - mn) + partial[li + k] * exp(m2 - mn);
      partial_m[li] = mn;
    }
    workgroupBarrier();
  }
  let mx = partial_m[0];
  let inv = 1.0 / partial[0];
  let orow = p.off_out + row * p.s;
  for (var j = li; j < p.s; j += 256u) {
    out[orow + j] = select(0.0, exp(x[xr + j] - mx) * inv, j < visible);
  }
}
