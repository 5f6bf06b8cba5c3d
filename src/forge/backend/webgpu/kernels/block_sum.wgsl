// The second pass of the column reductions (sum_rows, LayerNorm's dγ/dβ): out[j] (+)= the sum
// over blocks of part[b·stride + j], blocks in order, one thread per column.
struct Params { blocks: u32, c: u32, stride: u32, off_part: u32, off_out: u32, accumulate: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let j = gid.x + gid.y * nwg.x * 256u;
  if (j >= p.c) { return; }
  var acc = 0.0;
  for (var b = 0u; b < p.blocks; b++) { acc += part[p.off_part + b * p.stride + j]; }
  if (p.accumulate != 0u) { acc += out[p.off_out + j]; }
  out[p.off_out + j] = acc;
}
