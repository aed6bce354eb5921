#include "bert/model/activation_checkpoint.h"

#include <torch/csrc/autograd/autograd.h>

#include <utility>
#include <vector>

#include "bert/common/autocast.h"

namespace bert {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// What a recomputation must repeat: the function, the generator states its dropout drew from,
/// the autocast setting it ran under.
struct Recipe : torch::CustomClassHolder {
  std::function<torch::Tensor(const torch::Tensor&)> fn;
  std::vector<std::pair<at::Generator, torch::Tensor>> rng;  ///< generator, state before fn
  bool autocast_cpu = false, autocast_gpu = false;
  at::ScalarType cpu_dtype = at::kBFloat16, gpu_dtype = at::kHalf;
};

torch::Tensor generator_state(at::Generator& generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_generator_state(at::Generator& generator, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

/// Puts the first run's generator states and autocast setting in place; the current ones back
/// on destruction (backward must not disturb the dropout of later forwards).
class Replay {
 public:
  explicit Replay(const Recipe& r)
      : cpu_(autocast::enabled(c10::kCPU)),
        gpu_(autocast::enabled(c10::kCUDA)),
        cpu_dtype_(autocast::dtype(c10::kCPU)),
        gpu_dtype_(autocast::dtype(c10::kCUDA)) {
    for (auto [generator, state] : r.rng) {
      now_.emplace_back(generator, generator_state(generator));
      set_generator_state(generator, state);
    }
    autocast::set_enabled(c10::kCPU, r.autocast_cpu);
    autocast::set_enabled(c10::kCUDA, r.autocast_gpu);
    autocast::set_dtype(c10::kCPU, r.cpu_dtype);
    autocast::set_dtype(c10::kCUDA, r.gpu_dtype);
  }
  ~Replay() {
    for (auto& [generator, state] : now_) set_generator_state(generator, state);
    autocast::set_enabled(c10::kCPU, cpu_);
    autocast::set_enabled(c10::kCUDA, gpu_);
    autocast::set_dtype(c10::kCPU, cpu_dtype_);
    autocast::set_dtype(c10::kCUDA, gpu_dtype_);
    if (!cpu_ && !gpu_) at::autocast::clear_cache();
  }
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;

 private:
  bool cpu_, gpu_;
  at::ScalarType cpu_dtype_, gpu_dtype_;
  std::vector<std::pair<at::Generator, torch::Tensor>> now_;
};

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx,
                               const torch::Tensor& input,
                               c10::intrusive_ptr<Recipe> recipe) {
    ctx->save_for_backward({input});
    ctx->saved_data["recipe"] = c10::IValue::make_capsule(recipe);
    return recipe->fn(input);  // Function::apply runs forward without grad
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto recipe =
        c10::static_intrusive_pointer_cast<Recipe>(ctx->saved_data["recipe"].toCapsule());
    const torch::Tensor saved = ctx->get_saved_variables()[0];
    torch::Tensor input = saved.detach().requires_grad_(saved.requires_grad());
    torch::Tensor output;
    {
      const Replay replay(*recipe);
      const torch::AutoGradMode grad(true);
      output = recipe->fn(input);
    }
    if (output.requires_grad()) torch::autograd::backward({output}, {grads[0]});
    return {saved.requires_grad() ? input.grad() : torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpointed(std::function<torch::Tensor(const torch::Tensor&)> fn,
                           const torch::Tensor& input) {
  auto recipe = c10::make_intrusive<Recipe>();
  recipe->fn = std::move(fn);
  // The generators dropout draws from: the CPU one (hash_dropout's keys) and, for a tensor on
  // an accelerator, its device's.
  std::vector<at::Device> devices = {at::kCPU};
  if (!input.device().is_cpu()) devices.push_back(input.device());
  for (const auto& device : devices) {
    auto generator = at::globalContext().defaultGenerator(device);
    recipe->rng.emplace_back(generator, generator_state(generator));
  }
  recipe->autocast_cpu = autocast::enabled(c10::kCPU);
  recipe->autocast_gpu = autocast::enabled(c10::kCUDA);
  recipe->cpu_dtype = autocast::dtype(c10::kCPU);
  recipe->gpu_dtype = autocast::dtype(c10::kCUDA);
  // Autograd records the Function only when an input needs a gradient: with frozen embeddings
  // the layer's parameters would silently get none. A detached leaf that asks for one keeps the
  // node (its own gradient is computed and dropped).
  const bool record = torch::GradMode::is_enabled() && !input.requires_grad();
  return CheckpointFunction::apply(record ? input.detach().requires_grad_(true) : input, recipe);
}

}  // namespace bert
