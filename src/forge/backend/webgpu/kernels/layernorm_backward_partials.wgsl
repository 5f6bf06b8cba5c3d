// LayerNorm backward, dγ/dβ first pass: one thread per (column j, block of 64 rows) writes
// part[block·2c + j] = Σ dy·x̂ and part[block·2c + c + j] = Σ dy, rows in order (the CPU's
// fixed blocks); block_sum.wgsl adds the blocks.
struct Params { rows: u32, c: u32, off_x: u32, off_dy: u32, off_stats: u32, off_part: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = gid.x + gid.y * nwg.x * 256u;
  let blocks = (p.rows + 63u) / 64u;
  if (e >= blocks * p.c) { return; }
  let blk = e / p.c;
  let j = e % p.c;
  let r1 = min(p.rows, blk * 64u + 64u);
  var dw = 0.0;
  var db = 0.0;
  for (var i = blk * 64u; i < r1; i++) {
    let g = dy[p.off_dy + i * p.c + j];
    let xhat = (x[p.off_x + i * p.c + j] - stats[p.off_stats + 2u * i]) * stats[p.off_stats + 2u * i + 1u];
    dw += g * xhat;
    db += g;
  }
  part[p.off_part + blk * 2u * p.c + j] = dw;
  part[p.off_part + blk * 2u * p.c + p.c + j] = db;
}
