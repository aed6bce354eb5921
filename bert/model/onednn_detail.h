#pragma once

// What bert/model/onednn_linear.cpp and onednn_attention.cpp share; not part of bertft's API.

#ifdef BERTFT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace bert::detail {

/// Whether environment variable `name` is set to `value` (the switches that keep an old path for
/// side-by-side measurements).
bool env_is(const char* name, const char* value);

#ifdef BERTFT_HAVE_DNNL
/// The one oneDNN CPU engine every primitive of this process runs on.
const dnnl::engine& onednn_cpu_engine();
/// Whether oneDNN's effective ISA (the CPU's, lowered by ONEDNN_MAX_CPU_ISA) includes `wanted`
/// (an ISA includes those below it: avx512_core_vnni has avx512_core and avx2).
bool onednn_isa_has(dnnl::cpu_isa wanted);
#endif

}  // namespace bert::detail
