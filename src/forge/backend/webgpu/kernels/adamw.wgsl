// One AdamW step in place on param, m, v (core/backend.h AdamWParams), as cpu::ref::adamw.
struct Params {
  n: u32, off_param: u32, off_grad: u32, off_m: u32,
  off_v: u32, beta1: f32, beta2: f32, eps: f32,
  decay: f32, step_size: f32, bc2_sqrt: f32, grad_scale: f32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> param: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n) { return; }
  let g = grad[p.off_grad + i] * p.grad_scale;
  let mi = p.beta1 * m[p.off_m + i] + (1.0 - p.beta1) * g;
  let vi = p.beta2 * v[p.off_v + i] + (1.0 - p.beta2) * g * g;
  m[p.off_m + i] = mi;
  v[p.off_v + i] = vi;
  let denom = sqrt(vi) / p.bc2_sqrt + p.eps;
  param[p.off_param + i] = param[p.off_param + i] * p.decay - p.step_size * (mi / denom);
}
