// Fused softmax cross-entropy, one workgroup per row of logits [rows, v]:
// loss = log Σ exp(x − max) − (x[target] − max), and with has_grad
// dlogits = (softmax(x) − onehot(target))·grad_scale. Rows are bound in chunks by the host, so
// off_targets/off_losses already point at the chunk's first row.
struct Params {
  rows: u32, v: u32, off_x: u32, off_targets: u32,
  off_losses: u32, off_dl: u32, has_grad: u32, grad_scale: f32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<u32>;
@group(0) @binding(3) var<storage, read_write> losses: array<f32>;
@group(0) @binding(4) var<storage, read_write> dl: array<f32>;
// A target ≥ v cannot throw on the GPU: it is recorded (target + 1) and the host raises
// forge::Error at its next readback, as embedding.wgsl does for a bad id.
@group(0) @binding(5) var<storage, read_write> status: array<atomic<u32>>;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let xr = p.off_x + row * p.v;
  var m = -3.402823e38;
  for (var j = li; j < p.v; j += 256u) { m = max(m, x[xr + j]); }
  partial[li] = m;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) { partial[li] = max(partial[li], partial[li + k]); }
    workgroupBarrier();
  }
  m = partial[0];
  workgroupBarrier();
  var sum = 0.0;
  for (var j = li; j < p.v; j += 256u) { sum += exp(x[xr + j] - m); }
  partial[li] = sum;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (li < k) { partial[li] += partial[li + k]; }
    workgroupBarrier();
  }
  sum = partial[0];
  let tgt = targets[p.off_targets + row];
  let ok = tgt < p.v;
  if (li == 0u) {
    if (ok) {
      losses[p.off_losses + row] = log(sum) - (x[xr + tgt] - m);
    } else {
      atomicMax(&status[0], tgt + 1u);
      losses[p.off_losses + row] = 0.0;
    }
  }
  if (p.has_grad == 0u) { return; }
  let inv = 1.0 / sum;
  let orow = p.off_dl + row * p.v;
  for (var j = li; j < p.v; j += 256u) {
    let onehot = select(0.0, 1.0, j == tgt);
    dl[orow + j] = (exp(x[xr + j] - m) * inv - onehot) * p.grad_scale;
  }
}
