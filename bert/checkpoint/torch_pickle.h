#pragma once

#include <filesystem>

#include "bert/checkpoint/tensor_map.h"

namespace bert {

/// Reads a state dict saved by `torch.save`: the zip format (PyTorch >= 1.6; what
/// `save_pretrained` writes as `pytorch_model.bin`) or the legacy one older checkpoints on the hub
/// still have (five pickles, then the raw storages; read through a read-only mapping of the
/// file). The pickles are read by a small restricted unpickler (written by hand, since LibTorch's
/// `torch::pickle_load` rejects the OrderedDict-with-`_metadata` state dicts that older
/// transformers wrote, and reads no legacy files): it accepts only the globals a state dict needs
/// (collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter,
/// torch.*Storage) and rejects every other one with CheckpointError, so a checkpoint can never
/// run code. Tensors that share a storage (tied weights) share memory.
TensorMap load_torch_state_dict(const std::filesystem::path& path);

}  // namespace bert
