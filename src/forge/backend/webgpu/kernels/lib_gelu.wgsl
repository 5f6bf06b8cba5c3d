// GPT-2's tanh GELU (gelu_new), as cpu::ref::gelu; included by the kernels that apply it.
fn gelu_tanh(v: f32) -> f32 {
  // Drivers may lower tanh to (e^2u − 1)/(e^2u + 1), which is inf/inf = NaN for large |u|;
  // tanh(±15) is already ±1 in f32, so clamping changes nothing else.
  let u = clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0);
  return 0.5 * v * (1.0 + tanh(u));
}
