// A recipe: YAML parsed, validated as a whole, its sweep expanded into trials (what
// `bertft validate` does, without looking for the files it names).
#include "bert/common/error.h"
#include "fuzz/fuzz_input.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bert::fuzz::InputFile file(data, size);
  try {
    const auto recipe = bert::recipes::load_recipe(file.path(), {}, /*check_files=*/false);
    const auto trials = bert::recipes::expand_sweep(recipe, /*check_files=*/false);
    (void)trials;
  } catch (const bert::Error&) {
  }
  return 0;
}
