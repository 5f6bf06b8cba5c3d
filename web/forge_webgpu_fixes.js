// --js-library for forge_wasm (not part of the site): fixes to Emscripten 3.1.6's WebGPU glue
// for the API browsers ship now, and the waits platform_browser.cpp makes through Asyncify.
mergeInto(LibraryManager.library, {
  // 3.1.6 calls pass.dispatch / dispatchIndirect, renamed dispatchWorkgroups* in the spec.
  wgpuComputePassEncoderDispatch__deps: ['$WebGPU'],
  wgpuComputePassEncoderDispatch: function(passId, x, y, z) {
    WebGPU.mgrComputePassEncoder.get(passId)['dispatchWorkgroups'](x, y, z);
  },
  wgpuComputePassEncoderDispatchIndirect__deps: ['$WebGPU'],
  wgpuComputePassEncoderDispatchIndirect: function(passId, bufferId, offsetLow, offsetHigh) {
    WebGPU.mgrComputePassEncoder.get(passId)['dispatchWorkgroupsIndirect'](
      WebGPU.mgrBuffer.get(bufferId), offsetHigh * 4294967296 + (offsetLow >>> 0));
  },

  // The waits. Each suspends the calling C++ (Asyncify) until the promise settles, so the
  // browser's event loop runs meanwhile; none polls.

  // Maps [0, size) of a MapRead buffer, copies it to dst and unmaps; 0 on success, else a
  // malloc'd message (the caller frees it).
  forge_gpu_map_read__deps: ['$WebGPU', '$Asyncify'],
  forge_gpu_map_read: function(bufferId, size, dst) {
    return Asyncify.handleAsync(function() {
      var buffer = WebGPU.mgrBuffer.get(bufferId);
      return buffer['mapAsync'](GPUMapMode.READ, 0, size).then(function() {
        HEAPU8.set(new Uint8Array(buffer['getMappedRange'](0, size)), dst);
        buffer['unmap']();
        return 0;
      }, function(e) {
        return allocateUTF8('mapAsync failed: ' + (e.message || e));
      });
    });
  },

  // Pops the device's error scope: 0 when it caught nothing, else a malloc'd message.
  forge_gpu_pop_error_scope__deps: ['$WebGPU', '$Asyncify'],
  forge_gpu_pop_error_scope: function(deviceId) {
    return Asyncify.handleAsync(function() {
      return WebGPU.mgrDevice.get(deviceId)['popErrorScope']().then(function(error) {
        return error ? allocateUTF8(error.message || 'unknown error') : 0;
      }, function(e) {
        return allocateUTF8(e.message || String(e));
      });
    });
  },

  // Waits for every submitted command buffer.
  forge_gpu_queue_done__deps: ['$WebGPU', '$Asyncify'],
  forge_gpu_queue_done: function(queueId) {
    return Asyncify.handleAsync(function() {
      return WebGPU.mgrQueue.get(queueId)['onSubmittedWorkDone']().then(function() {
        return 0;
      }, function() {
        return 0;  // a lost device; the lost handler below has recorded why
      });
    });
  },

  // The adapter's name as forge.js found it (GPUAdapterInfo), malloc'd.
  forge_gpu_adapter_name: function() {
    return allocateUTF8(Module['forgeAdapterName'] || 'WebGPU adapter');
  },

  // Uncaptured errors and device loss, kept for the next submit or readback to throw.
  forge_gpu_watch_errors__deps: ['$WebGPU'],
  forge_gpu_watch_errors: function(deviceId) {
    var device = WebGPU.mgrDevice.get(deviceId);
    Module['forgeGpuErrors'] = [];
    device['addEventListener']('uncapturederror', function(event) {
      Module['forgeGpuErrors'].push(event.error.message || 'uncaptured WebGPU error');
    });
    device['lost'].then(function(info) {
      if (info.reason !== 'destroyed') Module['forgeGpuErrors'].push('device lost: ' + info.message);
    });
  },
  // The first error recorded since the last call (malloc'd), or 0.
  forge_gpu_take_error: function() {
    var errors = Module['forgeGpuErrors'] || [];
    if (!errors.length) return 0;
    var first = errors[0];
    errors.length = 0;
    return allocateUTF8(first);
  },
});
