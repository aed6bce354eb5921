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
#endif

}  // namespace bert::detail
