// x [bh, rows, d] → cache [bh, capacity, d] at rows [pos, pos + rows).
struct Params { n: u32, rows: u32, d: u32, capacity: u32, pos: u32, off_cache: u32, off_x: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> cache: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = gid.x + gid.y * nwg.x * 256u;
  if (e >= p.n) { return; }
  let per_head = p.rows * p.d;
  let h = e / per_head;
  cache[p.off_cache + (h * p.capacity + p.pos) * p.d + e % per_head] = x[p.off_x + e];
}
