// GPT-2's tanh GELU (gelu_new), as cpu::ref::gelu.
struct Params { n: u32, off_out: u32, off_x: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n) { return; }
  let v = x[p.off_x + i];
  // Drivers may lower tanh to (e^2u − 1)/(e^2u + 1), which is inf/inf = NaN for large |u|;
  // tanh(±15) is already ±1 in f32, so clamping changes nothing else.
  let u = clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0);
  out[p.off_out + i] = 0.5 * v * (1.0 + tanh(u));
}
