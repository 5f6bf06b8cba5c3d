// One workgroup per row of x [rows, n]: the Shannon entropy (nats) of softmax(x), as
// cpu::ref::entropy. With m the row max, s = Σ exp(x − m) and t = Σ exp(x − m)·(x − m):
// H = −Σ p·log p = log s − t / s.
struct Params { rows: u32, n: u32, off_out: u32, off_x: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

var<workgroup> part_s: array<f32, 256>;
var<workgroup> part_t: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let xr = p.off_x + row * p.n;
  var m = -3.402823e38;
  for (var j = li; j < p.n; j += 256u) { m = max(m, x[xr + j]); }
  part_s[li] = m;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) { part_s[li] = max(part_s[li], part_s[li + k]); }
    workgroupBarrier();
  }
  m = part_s[0];
  workgroupBarrier();
  var s = 0.0;
  var t = 0.0;
  for (var j = li; j < p.n; j += 256u) {
    let d = x[xr + j] - m;
    let e = exp(d);
    s += e;
    t += e * d;
  }
  part_s[li] = s;
  part_t[li] = t;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) {
      part_s[li] += part_s[li + k];
      part_t[li] += part_t[li + k];
    }
    workgroupBarrier();
  }
  if (li == 0u) { out[p.off_out + row] = log(part_s[0]) - part_t[0] / part_s[0]; }
}
