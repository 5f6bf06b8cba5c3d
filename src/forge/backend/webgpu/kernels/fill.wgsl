// out[i] = value (as bits, so one kernel fills f32 and u32 tensors).
struct Params { n: u32, off: u32, value: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * 256u;  // 2-D grid: a 1-D one stops at 65535 groups
  if (i >= p.n) { return; }
  out[p.off + i] = p.value;
}
