// A 256-wide workgroup sum, included by the LayerNorm kernels (one workgroup per row).
var<workgroup> partial: array<f32, 256>;

fn reduce_sum(li: u32, v: f32) -> f32 {
  partial[li] = v;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s = s >> 1u) {
    if (li < s) { partial[li] += partial[li + s]; }
    workgroupBarrier();
  }
  let total = partial[0];
  workgroupBarrier();  // everyone has read it before the next reduction overwrites it
  return total;
}
