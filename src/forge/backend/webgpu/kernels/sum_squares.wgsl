// Σ x² in two passes (f32 tree sums; the CPU's double sum agrees to ~1e-6 relative):
// `partials` writes one sum per workgroup of 4096 elements, `finish` adds them in one workgroup.
struct Params { n: u32, off_in: u32, off_out: u32, square: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, 256>;

fn reduce(li: u32, v: f32) -> f32 {
  partial[li] = v;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s = s >> 1u) {
    if (li < s) { partial[li] += partial[li + s]; }
    workgroupBarrier();
  }
  return partial[0];
}

@compute @workgroup_size(256)
fn partials(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
            @builtin(local_invocation_index) li: u32) {
  let g = wid.x + wid.y * nwg.x;
  let first = g * 4096u;
  if (first >= p.n) { return; }  // uniform per workgroup
  var acc = 0.0;
  for (var k = 0u; k < 16u; k++) {
    let i = first + k * 256u + li;
    if (i < p.n) { let v = x[p.off_in + i]; acc += v * v; }
  }
  let total = reduce(li, acc);
  if (li == 0u) { out[p.off_out + g] = total; }
}

@compute @workgroup_size(256)
fn finish(@builtin(local_invocation_index) li: u32) {
  var acc = 0.0;
  for (var i = li; i < p.n; i += 256u) { acc += x[p.off_in + i]; }
  let total = reduce(li, acc);
  if (li == 0u) { out[p.off_out] = total; }
}
