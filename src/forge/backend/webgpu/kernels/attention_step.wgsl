// ops::attention_step, one workgroup per head: appends the token's k, v (from qkv [q | k | v])
// at row pos of the caches [n_head, capacity, d], then writes softmax(alpha · q·Kᵀ)·V over rows
// [0, pos] into out's slice of this head (heads merged), and the weights into probs when asked.
struct Params {
  n_head: u32, d: u32, capacity: u32, pos: u32,
  off_qkv: u32, off_k: u32, off_v: u32, off_out: u32,
  off_probs: u32, has_probs: u32, alpha: f32, pad: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> cache_k: array<f32>;
@group(0) @binding(3) var<storage, read_write> cache_v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> probs: array<f32>;

#include "lib_attend"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let length = p.pos + 1u;
  let keys = p.off_k + h * p.capacity * p.d;
  let values = p.off_v + h * p.capacity * p.d;
  attend_weights(li, p.off_qkv + h * p.d, p.n_head * p.d, p.d, keys, values, p.pos, p.alpha);
  if (p.has_probs != 0u) {
    for (var j = li; j < length; j += WG) { probs[p.off_probs + h * length + j] = w[j]; }
  }
  attend_values(li, p.d, values, length, p.off_out + h * p.d);
}
