// ops::attention_steps over sequences whose key caches lie in one binding and value caches in
// another (KvArena places a model's caches side by side): workgroup (h, b) is head h of the
// table's sequence b, computed exactly as attention_step computes it. seqs[b] = (row of qkv
// [B, 3c] and out [B, c], element of its key cache, of its value cache, pos), the caches'
// elements counted from the start of their bindings.
struct Params {
  n_head: u32, d: u32, capacity: u32, off_qkv: u32,
  off_out: u32, alpha: f32, pad0: u32, pad1: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> cache_k: array<f32>;
@group(0) @binding(3) var<storage, read_write> cache_v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> seqs: array<vec4u>;

#include "lib_attend"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let s = seqs[wid.y];
  let c = p.n_head * p.d;
  let keys = s.y + h * p.capacity * p.d;
  let values = s.z + h * p.capacity * p.d;
  attend_weights(li, p.off_qkv + s.x * 3u * c + h * p.d, c, p.d, keys, values, s.w, p.alpha);
  attend_values(li, p.d, values, s.w + 1u, p.off_out + s.x * c + h * p.d);
}
