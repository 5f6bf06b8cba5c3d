// Contiguous out[i] = x[strided index of i], up to rank 4 (dims padded with 1 at the front).
struct Params {
  n: u32, off_out: u32, off_x: u32, pad: u32,
  d1: u32, d2: u32, d3: u32, pad2: u32,
  s0: u32, s1: u32, s2: u32, s3: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n) { return; }
  let i3 = i % p.d3;
  var t = i / p.d3;
  let i2 = t % p.d2;
  t = t / p.d2;
  let i1 = t % p.d1;
  let i0 = t / p.d1;
  out[p.off_out + i] = x[p.off_x + i0 * p.s0 + i1 * p.s1 + i2 * p.s2 + i3 * p.s3];
}
