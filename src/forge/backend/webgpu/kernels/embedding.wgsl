// out[i, j] = wte[ids[i], j] + wpe[pos_offset + i mod seq_len, j], over one row chunk of wte:
// wte may exceed the storage binding limit, so the host dispatches once per chunk of rows
// [row_begin, row_end) and each chunk writes only the tokens that fall in it.
struct Params {
  n: u32, c: u32, seq_len: u32, pos_offset: u32,
  row_begin: u32, row_end: u32, vocab: u32, check: u32,
  off_out: u32, off_ids: u32, off_wte: u32, off_wpe: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> wte: array<f32>;
@group(0) @binding(3) var<storage, read> wpe: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
// A bad id cannot throw on the GPU: it is recorded (id + 1, the largest wins) and the host
// raises forge::Error at its next readback.
@group(0) @binding(5) var<storage, read_write> status: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = gid.x + gid.y * nwg.x * 256u;
  if (e >= p.n * p.c) { return; }
  let i = e / p.c;
  let j = e % p.c;
  let id = ids[p.off_ids + i];
  if (id >= p.vocab) {
    if (p.check != 0u) {
      atomicMax(&status[0], id + 1u);
      out[p.off_out + e] = 0.0;
    }
    return;
  }
  if (id < p.row_begin || id >= p.row_end) { return; }
  let pos = p.pos_offset + i % p.seq_len;
  out[p.off_out + e] = wte[p.off_wte + (id - p.row_begin) * p.c + j] + wpe[p.off_wpe + pos * p.c + j];
}
