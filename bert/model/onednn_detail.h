#pragma once

// What bert/model/onednn_linear.cpp and onednn_attention.cpp share; not part of bertft's API.

#ifdef BERTFT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace bert::detail {

/// Whether environment variable `name` is set to `value` (the switches that keep an old path for
/// side-by-side measurements).
bool env_is(const char* name, const char* value);

/// Whether ISA `isa` includes `wanted`, both in oneDNN's numbering (dnnl::cpu_isa, where an ISA's
/// bits are a superset of those of every ISA it includes): all of `wanted`'s bits, not just some
/// (avx2 shares bits with avx512_core without including it).
bool isa_includes(unsigned isa, unsigned wanted);

#ifdef BERTFT_HAVE_DNNL
/// The one oneDNN CPU engine every primitive of this process runs on.
const dnnl::engine& onednn_cpu_engine();
/// Whether oneDNN's effective ISA (the CPU's, lowered by ONEDNN_MAX_CPU_ISA) includes `wanted`
/// (an ISA includes those below it: avx512_core_vnni has avx512_core and avx2).
bool onednn_isa_has(dnnl::cpu_isa wanted);
#endif

}  // namespace bert::detail
