#pragma once

#include <filesystem>

// What the tests and the benchmarks read beside the product, in one place for both (the
// benchmarks link no test code): the shared material and the HF reference kit's interpreter.
namespace bert::testing {

/// ../shared beside the source tree, or $BERTFT_SHARED where set and not empty.
std::filesystem::path shared_dir();

/// The HF reference kit's Python interpreter: $BERTFT_HF_PYTHON where set and not empty, else
/// build/hf-reference/python (which exists where scripts/setup.sh found the kit in ../shared).
std::filesystem::path hf_python_path();

}  // namespace bert::testing
