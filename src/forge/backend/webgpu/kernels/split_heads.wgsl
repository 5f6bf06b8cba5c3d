// qkv [b·t, 3c] → q, k, v [b·h, t, d]; one thread per element of q.
struct Params { n: u32, t: u32, h: u32, d: u32, off_q: u32, off_k: u32, off_v: u32, off_qkv: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> q: array<f32>;
@group(0) @binding(3) var<storage, read_write> k: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = gid.x + gid.y * nwg.x * 256u;
  if (e >= p.n) { return; }
  let di = e % p.d;
  let ti = (e / p.d) % p.t;
  let bh = e / (p.d * p.t);
  let c = p.h * p.d;
  let src = p.off_qkv + ((bh / p.h) * p.t + ti) * 3u * c + (bh % p.h) * p.d + di;
  q[p.off_q + e] = qkv[src];
  k[p.off_k + e] = qkv[src + c];
  v[p.off_v + e] = qkv[src + 2u * c];
}
