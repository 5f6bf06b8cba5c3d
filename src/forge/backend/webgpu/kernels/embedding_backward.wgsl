// dwte scatter-add over one row chunk [row_begin, row_end) of dwte (zeroed by the host first):
// one thread per (token i, column j) adds dout[i, j] into dwte[ids[i], j]. Repeated ids
// collide and WGSL has no f32 atomics, so the add is a compare-exchange loop on the float's
// bits; a plain += would silently lose gradient.
struct Params {
  n: u32, c: u32, row_begin: u32, row_end: u32,
  vocab: u32, check: u32, off_ids: u32, off_dout: u32,
  off_dwte: u32, pad0: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> dout: array<f32>;
@group(0) @binding(3) var<storage, read_write> dwte: array<atomic<u32>>;
// A bad id is recorded (id + 1) for the host to raise at its next readback.
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = gid.x + gid.y * nwg.x * 256u;
  if (e >= p.n * p.c) { return; }
  let i = e / p.c;
  let j = e % p.c;
  let id = ids[p.off_ids + i];
  if (id >= p.vocab) {
    if (p.check != 0u && j == 0u) { atomicMax(&status[0], id + 1u); }
    return;
  }
  if (id < p.row_begin || id >= p.row_end) { return; }
  let g = dout[p.off_dout + e];
  let k = p.off_dwte + (id - p.row_begin) * p.c + j;
  var old = atomicLoad(&dwte[k]);
  loop {
    let r = atomicCompareExchangeWeak(&dwte[k], old, bitcast<u32>(bitcast<f32>(old) + g));
    if (r.exchanged) { break; }
    old = r.old_value;
  }
}
