// out[i] = keep(i) ? x[i] · scale : 0 with the mask of core/dropout.h, word for word; `base` is
// this chunk's first global element index, so chunked dispatches draw the CPU's mask.
struct Params { n: u32, off_out: u32, off_x: u32, base: u32, key: u32, threshold: u32, scale: f32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

fn mix32(x0: u32) -> u32 {
  var x = x0;
  x ^= x >> 16u; x *= 0x7feb352du; x ^= x >> 15u; x *= 0x846ca68bu; x ^= x >> 16u;
  return x;
}
fn dropout_keep(key: u32, i: u32, threshold: u32) -> bool {
  return (mix32(mix32(i) ^ key) >> 8u) >= threshold;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n) { return; }
  let keep = dropout_keep(p.key, p.base + i, p.threshold);
  out[p.off_out + i] = select(0.0, x[p.off_x + i] * p.scale, keep);
}
