// heads [b·h, t, d] → out [b·t, h·d]; one thread per element of out.
struct Params { n: u32, t: u32, h: u32, d: u32, off_out: u32, off_x: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = gid.x + gid.y * nwg.x * 256u;
  if (e >= p.n) { return; }
  let c = p.h * p.d;
  let r = e / c;
  let col = e % c;
  let src = (((r / p.t) * p.h + col / p.d) * p.t + r % p.t) * p.d + col % p.d;
  out[p.off_out + e] = x[p.off_x + src];
}
