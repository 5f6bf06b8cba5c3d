// dwpe without atomics: one thread per (row r of dwpe [n_ctx, c], column j) sums, in sequence
// order, dout[s·seq_len + r − pos_offset, j] over the seqs sequences; rows outside
// [pos_offset, pos_offset + seq_len) are 0.
struct Params { n_ctx: u32, c: u32, seq_len: u32, pos_offset: u32, seqs: u32, off_dout: u32, off_dwpe: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dout: array<f32>;
@group(0) @binding(2) var<storage, read_write> dwpe: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = gid.x + gid.y * nwg.x * 256u;
  if (e >= p.n_ctx * p.c) { return; }
  let r = e / p.c;
  let j = e % p.c;
  var acc = 0.0;
  if (r >= p.pos_offset && r < p.pos_offset + p.seq_len) {
    let pos = r - p.pos_offset;
    for (var s = 0u; s < p.seqs; s++) { acc += dout[p.off_dout + (s * p.seq_len + pos) * p.c + j]; }
  }
  dwpe[p.off_dwpe + e] = acc;
}
