// First pass of sum_rows: one thread per (column j, block of 64 rows) sums the block's rows in
// order into part[block·c + j] (the CPU's fixed row blocks; block_sum.wgsl adds the blocks).
struct Params { rows: u32, c: u32, off_x: u32, off_part: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> part: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = gid.x + gid.y * nwg.x * 256u;
  let blocks = (p.rows + 63u) / 64u;
  if (e >= blocks * p.c) { return; }
  let blk = e / p.c;
  let j = e % p.c;
  let r1 = min(p.rows, blk * 64u + 64u);
  var acc = 0.0;
  for (var i = blk * 64u; i < r1; i++) { acc += x[p.off_x + i * p.c + j]; }
  part[p.off_part + blk * p.c + j] = acc;
}
