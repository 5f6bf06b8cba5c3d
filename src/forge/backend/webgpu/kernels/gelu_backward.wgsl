// dx = dy · gelu′(x) for the tanh GELU, as cpu::ref::gelu_backward.
struct Params { n: u32, off_dx: u32, off_x: u32, off_dy: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n) { return; }
  let v = x[p.off_x + i];
  let k = 0.7978845608028654;
  // Clamped as in gelu.wgsl: a driver's (e^2u − 1)/(e^2u + 1) is NaN for large |u|.
  let th = tanh(clamp(k * (v + 0.044715 * v * v * v), -15.0, 15.0));
  let dinner = k * (1.0 + 3.0 * 0.044715 * v * v);
  dx[p.off_dx + i] = dy[p.off_dy + i] * (0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * dinner);
}
