#pragma once

#include <torch/torch.h>

#include <functional>

namespace bert {

/// Activation checkpointing (PyTorch's torch.utils.checkpoint, reentrant form): returns
/// fn(input) without keeping fn's intermediate activations for backward. Forward runs fn under
/// no-grad and saves only `input`; backward runs fn again on it, with grad, the random-generator
/// states (dropout masks) and autocast setting of the first run, and back-propagates through
/// the recomputed graph: gradients reach `input` and every parameter fn uses, exactly as without
/// checkpointing. Tensors fn captures besides `input` (an attention mask) get no gradient.
/// Costs one more forward of fn per backward; saves its activations (attention scores and
/// probabilities, feed-forward intermediates: most of a BERT layer's memory at long sequences).
torch::Tensor checkpointed(std::function<torch::Tensor(const torch::Tensor&)> fn,
                           const torch::Tensor& input);

}  // namespace bert
