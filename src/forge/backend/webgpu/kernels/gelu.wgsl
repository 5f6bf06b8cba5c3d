// GPT-2's tanh GELU (gelu_new), as cpu::ref::gelu.
#include "lib_gelu"
struct Params { n: u32, off_out: u32, off_x: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n) { return; }
  out[p.off_out + i] = gelu_tanh(x[p.off_x + i]);
}
