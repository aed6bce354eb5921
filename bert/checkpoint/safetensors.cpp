#include "bert/checkpoint/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"

namespace bert {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit

struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
  size_t bytes;
};
constexpr DtypeInfo kDtypes[] = {
    {"F64", torch::kDouble, 8},    {"F32", torch::kFloat, 4}, {"F16", torch::kHalf, 2},
    {"BF16", torch::kBFloat16, 2}, {"I64", torch::kLong, 8},  {"I32", torch::kInt, 4},
    {"I16", torch::kShort, 2},     {"I8", torch::kChar, 1},   {"U8", torch::kByte, 1},
    {"BOOL", torch::kBool, 1},
};

const DtypeInfo* find_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

uint64_t read_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

torch::ScalarType safetensors_dtype(const std::string& name) {
  if (const auto* d = find_dtype(name)) return d->type;
  throw CheckpointError(fmt::format("unsupported safetensors dtype '{}'", name));
}

std::string safetensors_dtype_name(torch::ScalarType type) {
  for (const auto& d : kDtypes)
    if (d.type == type) return d.name;
  throw CheckpointError(
      fmt::format("dtype {} cannot be written to safetensors", c10::toString(type)));
}

struct SafetensorsReader::Mapping {
  void* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data != nullptr && data != MAP_FAILED) ::munmap(data, size);
  }
};

SafetensorsReader::SafetensorsReader(const std::filesystem::path& path) : path_(path) {
  const std::string where = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw CheckpointError(fmt::format("{}: cannot open: {}", where, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw CheckpointError(fmt::format("{}: cannot stat: {}", where, std::strerror(errno)));
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    throw CheckpointError(fmt::format(
        "{}: truncated safetensors file: {} bytes, shorter than the 8-byte header length", where,
        file_size));
  }
  mapping_ = std::make_shared<Mapping>();
  mapping_->size = file_size;
  // Private + writable: tensors that share this memory may be modified in place by their
  // users without touching the file (copy-on-write).
  mapping_->data = ::mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping_->data == MAP_FAILED) {
    throw CheckpointError(fmt::format("{}: mmap failed: {}", where, std::strerror(errno)));
  }
  const auto* bytes = static_cast<const unsigned char*>(mapping_->data);
  const uint64_t header_len = read_le64(bytes);
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8) {
    throw CheckpointError(fmt::format(
        "{}: header length {} is larger than the file allows ({} bytes after the length field{})",
        where, header_len, file_size - 8,
        header_len > kMaxHeaderBytes ? ", limit 100 MiB" : "; the file may be truncated"));
  }
  data_start_ = 8 + header_len;
  const uint64_t data_size = file_size - data_start_;

  json header;
  try {
    header =
        parse_json_limited(std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len));
  } catch (const json::parse_error& e) {
    throw CheckpointError(fmt::format("{}: header is not valid JSON: {}", where, e.what()));
  }
  if (!header.is_object())
    throw CheckpointError(fmt::format("{}: header must be a JSON object", where));

  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object())
        throw CheckpointError(fmt::format("{}: __metadata__ must be an object", where));
      metadata_ = info;
      continue;
    }
    const std::string shown = clip(name);  // a lambda may not capture a structured binding
    const auto bad = [&](const std::string& what) {
      return CheckpointError(fmt::format("{}: tensor '{}': {}", where, shown, what));
    };
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets"))
      throw bad("expected {dtype, shape, data_offsets}");
    SafetensorsEntry e;
    e.name = name;
    if (!info["dtype"].is_string()) throw bad("dtype must be a string");
    e.dtype = info["dtype"].get<std::string>();
    const DtypeInfo* dtype = find_dtype(e.dtype);
    if (dtype == nullptr)
      throw bad(
          fmt::format("unknown or unsupported dtype '{}' (supported: F64 F32 F16 BF16 I64 "
                      "I32 I16 I8 U8 BOOL)",
                      clip(e.dtype)));
    const json& shape = info["shape"];
    if (!shape.is_array()) throw bad("shape must be a list");
    uint64_t numel = 1;
    for (const auto& dim : shape) {
      if (!dim.is_number_unsigned())
        throw bad(
            fmt::format("shape {} has a non-integer or negative dimension", clip(shape.dump())));
      const uint64_t d = dim.get<uint64_t>();
      if (d != 0 && numel > (uint64_t{1} << 62) / d) throw bad("shape overflows");
      numel *= d;
      e.shape.push_back(static_cast<int64_t>(d));
    }
    const json& offsets = info["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw bad("data_offsets must be [begin, end] of non-negative integers");
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    if (e.begin > e.end)
      throw bad(fmt::format("data_offsets [{}, {}] are reversed", e.begin, e.end));
    if (e.end > data_size)
      throw bad(
          fmt::format("data_offsets [{}, {}] point past the end of the data section ({} "
                      "bytes); the file may be truncated",
                      e.begin, e.end, data_size));
    if (e.end - e.begin != numel * dtype->bytes)
      throw bad(fmt::format("{} bytes for shape {} of {} ({} bytes expected)", e.end - e.begin,
                            clip(shape.dump()), e.dtype, numel * dtype->bytes));
    entries_.push_back(std::move(e));
  }
  // No two tensors may share bytes.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries_) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      throw CheckpointError(fmt::format("{}: tensors '{}' and '{}' overlap in the data section",
                                        where, by_offset[i - 1]->name, by_offset[i]->name));
  }
}

SafetensorsReader::~SafetensorsReader() = default;

bool SafetensorsReader::contains(const std::string& name) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const auto& e) { return e.name == name; });
}

torch::Tensor SafetensorsReader::get(const std::string& name,
                                     std::optional<torch::ScalarType> dtype) const {
  const auto it =
      std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.name == name; });
  if (it == entries_.end())
    throw CheckpointError(fmt::format("{}: no tensor named '{}'", path_.string(), name));
  auto* base = static_cast<char*>(mapping_->data) + data_start_ + it->begin;
  const auto file_type = safetensors_dtype(it->dtype);
  auto keep_alive = mapping_;
  torch::Tensor t;
  if (it->end == it->begin) {
    t = torch::empty(it->shape, torch::TensorOptions().dtype(file_type));
  } else {
    t = torch::from_blob(
        base, it->shape, [keep_alive](void*) {}, torch::TensorOptions().dtype(file_type));
  }
  if (dtype && *dtype != file_type && torch::isFloatingType(file_type)) t = t.to(*dtype);
  return t;
}

TensorMap SafetensorsReader::read_all(std::optional<torch::ScalarType> dtype) const {
  TensorMap out;
  for (const auto& e : entries_) out.emplace(e.name, get(e.name, dtype));
  return out;
}

std::string safetensors_bytes(const TensorMap& tensors, const json& metadata) {
  struct Item {
    std::string name;
    torch::Tensor tensor;
    size_t elem;
  };
  std::vector<Item> items;
  for (const auto& [name, tensor] : tensors) {
    TORCH_CHECK(tensor.defined(), "tensor '", name, "' is undefined");
    auto t = tensor.detach().to(torch::kCPU).contiguous();
    items.push_back({name, t, static_cast<size_t>(t.element_size())});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.elem != b.elem ? a.elem > b.elem : a.name < b.name;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.is_null() && !metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& item : items) {
    const uint64_t n = item.tensor.numel() * item.elem;
    header[item.name] = {{"dtype", safetensors_dtype_name(item.tensor.scalar_type())},
                         {"shape", item.tensor.sizes().vec()},
                         {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string header_text = header.dump();
  while (header_text.size() % 8 != 0) header_text.push_back(' ');
  std::string out;
  out.reserve(8 + header_text.size() + offset);
  uint64_t len = header_text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += header_text;
  for (const auto& item : items) {
    out.append(static_cast<const char*>(item.tensor.data_ptr()), item.tensor.numel() * item.elem);
  }
  return out;
}

void save_safetensors(const std::filesystem::path& path,
                      const TensorMap& tensors,
                      const json& metadata) {
  write_file_atomic(path, safetensors_bytes(tensors, metadata));
}

}  // namespace bert
