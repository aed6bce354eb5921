#include "bert/checkpoint/torch_pickle.h"

#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <unordered_map>
#include <variant>
#include <vector>

#include "bert/common/error.h"

namespace bert {
namespace {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

/// The few kinds of Python object a state-dict pickle contains.
struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kStorage,
    kTensor,
    kMark
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;                                    // string; global "module.name"
  std::vector<ValuePtr> items;                      // tuple, list
  std::vector<std::pair<ValuePtr, ValuePtr>> dict;  // dict / OrderedDict, insertion order
  torch::Tensor tensor;                             // storage (1-D) or tensor
  /// Creation number of a list or dict; for any value the smallest creation number of a list
  /// or dict it holds (itself included), kNoContainer if none. A list or dict may only take in
  /// values whose `reach` exceeds its own `id`, so that no container ever holds itself.
  uint64_t id = kNoContainer, reach = kNoContainer;
  static constexpr uint64_t kNoContainer = ~uint64_t{0};

  Value() = default;
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;
  /// Without recursion: a chain of a million nested tuples must not overflow the stack.
  ~Value() {
    std::vector<ValuePtr> pending;
    auto take_children = [&pending](Value& v) {
      for (auto& item : v.items) pending.push_back(std::move(item));
      for (auto& [key, value] : v.dict) {
        pending.push_back(std::move(key));
        pending.push_back(std::move(value));
      }
      v.items.clear();
      v.dict.clear();
    };
    take_children(*this);
    while (!pending.empty()) {
      ValuePtr v = std::move(pending.back());
      pending.pop_back();
      if (v && v.use_count() == 1) take_children(*v);  // v's last owner: its children move here
    }
  }
};

/// Limits on what a state-dict pickle may build: far above a real checkpoint's (BERT-large's
/// data.pkl makes ~10 000 values), far below what exhausts memory.
constexpr size_t kMaxPickleBytes = size_t{64} << 20;
constexpr uint64_t kMaxPickleValues = uint64_t{4} << 20;
constexpr size_t kMaxTensorDims = 16;

torch::ScalarType storage_dtype(const std::string& name, const std::string& where) {
  static const std::unordered_map<std::string, torch::ScalarType> types = {
      {"torch.FloatStorage", torch::kFloat}, {"torch.DoubleStorage", torch::kDouble},
      {"torch.HalfStorage", torch::kHalf},   {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kLong},   {"torch.IntStorage", torch::kInt},
      {"torch.ShortStorage", torch::kShort}, {"torch.CharStorage", torch::kChar},
      {"torch.ByteStorage", torch::kByte},   {"torch.BoolStorage", torch::kBool},
  };
  const auto it = types.find(name);
  if (it == types.end())
    throw CheckpointError(fmt::format("{}: unsupported storage type {}", where, name));
  return it->second;
}

/// Gives the data of a storage the pickle names: (key, dtype, numel, storage type name) -> a
/// 1-D tensor of numel elements. Throws CheckpointError when the data is missing or the wrong
/// size.
using StorageSource = std::function<torch::Tensor(
    const std::string& key, torch::ScalarType dtype, int64_t numel, const std::string& type)>;

class RestrictedUnpickler {
 public:
  /// Reads the pickle that starts at byte `start` of `data`; position() is where it stopped.
  RestrictedUnpickler(std::string_view data,
                      StorageSource storages,
                      std::string where,
                      size_t start = 0)
      : data_(data), storages_source_(std::move(storages)), where_(std::move(where)), pos_(start) {}

  size_t position() const { return pos_; }

  ValuePtr run() {
    while (true) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80:
          byte();
          break;  // PROTO
        case 0x95:
          take(8);
          break;  // FRAME
        case '}':
          push(make(Value::Kind::kDict));
          break;  // EMPTY_DICT
        case ']':
          push(make(Value::Kind::kList));
          break;  // EMPTY_LIST
        case ')':
          push(make(Value::Kind::kTuple));
          break;  // EMPTY_TUPLE
        case '(':
          push(make(Value::Kind::kMark));
          break;  // MARK
        case 'N':
          push(make(Value::Kind::kNone));
          break;  // NONE
        case 0x88:
          push_bool(true);
          break;  // NEWTRUE
        case 0x89:
          push_bool(false);
          break;  // NEWFALSE
        case 'K':
          push_int(byte());
          break;  // BININT1
        case 'M':
          push_int(uint16());
          break;  // BININT2
        case 'J':
          push_int(static_cast<int32_t>(uint32()));
          break;  // BININT
        case 0x8a:
          push_int(long1());
          break;  // LONG1
        case 'G':
          push_float();
          break;  // BINFLOAT
        case 'X':
          push_string(uint32());
          break;  // BINUNICODE
        case 0x8c:
          push_string(byte());
          break;  // SHORT_BINUNICODE
        case 'T':
          push_string(uint32());
          break;  // BINSTRING
        case 'U':
          push_string(byte());
          break;  // SHORT_BINSTRING
        case 'q':
          memo_put(byte());
          break;  // BINPUT
        case 'r':
          memo_put(uint32());
          break;  // LONG_BINPUT
        case 0x94:
          memo_put(memo_.size());
          break;  // MEMOIZE
        case 'h':
          memo_get(byte());
          break;  // BINGET
        case 'j':
          memo_get(uint32());
          break;  // LONG_BINGET
        case 't':
          push_tuple(pop_mark());
          break;  // TUPLE
        case 0x85:
          push_tuple(pop_n(1));
          break;  // TUPLE1
        case 0x86:
          push_tuple(pop_n(2));
          break;  // TUPLE2
        case 0x87:
          push_tuple(pop_n(3));
          break;     // TUPLE3
        case 'c': {  // GLOBAL
          std::string module = line();
          global(module, line());
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          auto name = pop(), module = pop();
          global(module->s, name->s);
          break;
        }
        case 'Q':
          persistent_load(pop());
          break;  // BINPERSID
        case 'R':
          reduce();
          break;  // REDUCE
        case 0x81:
          reduce();
          break;  // NEWOBJ (cls, args)
        case 'b':
          pop();
          break;     // BUILD: state ignored (_metadata)
        case 's': {  // SETITEM
          auto value = pop(), key = pop();
          auto target = dict_target();
          admit(*target, *key);
          admit(*target, *value);
          target->dict.emplace_back(key, value);
          break;
        }
        case 'u': {  // SETITEMS
          auto items = pop_mark();
          auto target = dict_target();
          if (items.size() % 2 != 0) fail("SETITEMS with an odd number of items");
          for (const auto& item : items) admit(*target, *item);
          for (size_t k = 0; k < items.size(); k += 2)
            target->dict.emplace_back(items[k], items[k + 1]);
          break;
        }
        case 'a': {  // APPEND
          auto value = pop();
          auto target = list_target();
          admit(*target, *value);
          target->items.push_back(value);
          break;
        }
        case 'e': {  // APPENDS
          auto items = pop_mark();
          auto target = list_target();
          for (const auto& item : items) admit(*target, *item);
          target->items.insert(target->items.end(), items.begin(), items.end());
          break;
        }
        case '.':
          return pop();  // STOP
        default:
          fail(fmt::format("unsupported pickle opcode 0x{:02x} at byte {}", op, pos_ - 1));
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(fmt::format("{}: {}", where_, what));
  }
  const char* take(size_t n) {
    if (n > data_.size() - pos_) fail("truncated pickle");
    const char* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint8_t byte() { return static_cast<uint8_t>(*take(1)); }
  uint16_t uint16() {
    const auto* p = reinterpret_cast<const uint8_t*>(take(2));
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
  }
  uint32_t uint32() {
    const auto* p = reinterpret_cast<const uint8_t*>(take(4));
    return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
  }
  int64_t long1() {
    const size_t n = byte();
    if (n > 8) fail("integer wider than 64 bits");
    const auto* p = reinterpret_cast<const uint8_t*>(take(n));
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(p[k]) << (8 * k);
    if (n > 0 && n < 8 && (p[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(v);
  }
  std::string line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos) fail("truncated pickle (GLOBAL without newline)");
    std::string s(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }

  ValuePtr make(Value::Kind kind) {
    if (++made_ > kMaxPickleValues)
      fail(fmt::format("the pickle builds more than {} values (a state dict needs far fewer)",
                       kMaxPickleValues));
    auto v = std::make_shared<Value>();
    v->kind = kind;
    if (kind == Value::Kind::kList || kind == Value::Kind::kDict) v->id = v->reach = made_;
    return v;
  }
  /// Checks that `container` (a list or dict) may take in `value` without holding itself.
  void admit(const Value& container, const Value& value) const {
    if (value.reach <= container.id) fail("malformed pickle (a container would contain itself)");
  }
  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  void push_bool(bool b) {
    auto v = make(Value::Kind::kBool);
    v->i = b;
    push(v);
  }
  void push_int(int64_t i) {
    auto v = make(Value::Kind::kInt);
    v->i = i;
    push(v);
  }
  void push_float() {
    const auto* p = reinterpret_cast<const uint8_t*>(take(8));
    uint64_t bits = 0;
    for (int k = 0; k < 8; ++k) bits = (bits << 8) | p[k];  // big-endian
    auto v = make(Value::Kind::kFloat);
    std::memcpy(&v->f, &bits, sizeof(double));
    push(v);
  }
  void push_string(size_t n) {
    auto v = make(Value::Kind::kString);
    v->s.assign(take(n), n);
    push(v);
  }
  void push_tuple(std::vector<ValuePtr> items) {
    auto v = make(Value::Kind::kTuple);
    for (const auto& item : items) v->reach = std::min(v->reach, item->reach);
    v->items = std::move(items);
    push(v);
  }
  ValuePtr pop() {
    if (stack_.empty()) fail("malformed pickle (stack underflow)");
    auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  std::vector<ValuePtr> pop_n(size_t n) {
    if (stack_.size() < n) fail("malformed pickle (stack underflow)");
    std::vector<ValuePtr> out(stack_.end() - static_cast<long>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return out;
  }
  std::vector<ValuePtr> pop_mark() {
    for (size_t k = stack_.size(); k-- > 0;) {
      if (stack_[k]->kind == Value::Kind::kMark) {
        std::vector<ValuePtr> out(stack_.begin() + static_cast<long>(k) + 1, stack_.end());
        stack_.resize(k);
        return out;
      }
    }
    fail("malformed pickle (no MARK)");
  }
  ValuePtr dict_target() {
    if (stack_.empty() || stack_.back()->kind != Value::Kind::kDict)
      fail("SETITEM(S) on a non-dict");
    return stack_.back();
  }
  ValuePtr list_target() {
    if (stack_.empty() || stack_.back()->kind != Value::Kind::kList)
      fail("APPEND(S) on a non-list");
    return stack_.back();
  }
  void memo_put(size_t index) {
    if (stack_.empty()) fail("malformed pickle (memo of empty stack)");
    memo_[index] = stack_.back();
  }
  void memo_get(size_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail(fmt::format("malformed pickle (memo {} unset)", index));
    push(it->second);
  }

  void global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    static const char* const allowed[] = {"collections.OrderedDict",
                                          "torch._utils._rebuild_tensor_v2",
                                          "torch._utils._rebuild_parameter",
                                          "torch.FloatStorage",
                                          "torch.DoubleStorage",
                                          "torch.HalfStorage",
                                          "torch.BFloat16Storage",
                                          "torch.LongStorage",
                                          "torch.IntStorage",
                                          "torch.ShortStorage",
                                          "torch.CharStorage",
                                          "torch.ByteStorage",
                                          "torch.BoolStorage"};
    bool ok = false;
    for (const char* a : allowed) ok = ok || full == a;
    if (!ok)
      fail(
          fmt::format("refusing pickle global '{}': a state dict needs only tensors and "
                      "OrderedDict (the file may contain code; it was not run)",
                      full));
    auto v = make(Value::Kind::kGlobal);
    v->s = full;
    push(v);
  }

  void persistent_load(const ValuePtr& pid) {
    // ('storage', storage_type, key, location, numel), and in the legacy (pre-1.6) format a
    // sixth item, the view metadata (None unless the storage is a view, torch < 0.4).
    if (pid->kind != Value::Kind::kTuple || pid->items.size() < 5 ||
        pid->items[0]->kind != Value::Kind::kString || pid->items[0]->s != "storage" ||
        pid->items[1]->kind != Value::Kind::kGlobal ||
        pid->items[2]->kind != Value::Kind::kString || pid->items[4]->kind != Value::Kind::kInt)
      fail("unsupported persistent id (expected ('storage', type, key, location, numel))");
    if (pid->items.size() > 5 && pid->items[5]->kind != Value::Kind::kNone)
      fail("storage views (checkpoints of torch < 0.4) are not supported");
    const std::string& key = pid->items[2]->s;
    auto it = storages_.find(key);
    if (it == storages_.end()) {
      const auto dtype = storage_dtype(pid->items[1]->s, where_);
      const int64_t numel = pid->items[4]->i;
      if (numel < 0) fail(fmt::format("storage '{}' claims {} elements", clip(key), numel));
      it = storages_.emplace(key, storages_source_(key, dtype, numel, pid->items[1]->s)).first;
    }
    auto v = make(Value::Kind::kStorage);
    v->tensor = it->second;
    push(v);
  }

  static std::vector<int64_t> int_tuple(const ValuePtr& v) {
    std::vector<int64_t> out;
    for (const auto& item : v->items) out.push_back(item->i);
    return out;
  }

  void reduce() {
    auto args = pop();
    auto callable = pop();
    if (callable->kind != Value::Kind::kGlobal || args->kind != Value::Kind::kTuple)
      fail("malformed pickle (REDUCE of a non-callable)");
    if (callable->s == "collections.OrderedDict") {
      push(make(Value::Kind::kDict));
    } else if (callable->s == "torch._utils._rebuild_tensor_v2") {
      // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
      if (args->items.size() < 4 || args->items[0]->kind != Value::Kind::kStorage)
        fail("malformed _rebuild_tensor_v2 arguments");
      const auto& storage = args->items[0]->tensor;
      const int64_t offset = args->items[1]->i;
      const auto size = int_tuple(args->items[2]);
      const auto stride = int_tuple(args->items[3]);
      if (size.size() > kMaxTensorDims || stride.size() != size.size())
        fail("tensor with invalid size or stride");
      int64_t last = offset;  // highest element index the view touches
      bool empty = false, overflow = false;
      for (size_t d = 0; d < size.size(); ++d) {
        if (size[d] == 0) empty = true;
        if (size[d] < 0 || stride[d] < 0) fail("tensor with invalid size or stride");
        int64_t span = 0;
        overflow = overflow ||
                   __builtin_mul_overflow(size[d] > 0 ? size[d] - 1 : 0, stride[d], &span) ||
                   __builtin_add_overflow(last, span, &last);
      }
      if (empty) {
        int64_t numel = 1;  // an empty tensor may still not claim more elements than exist
        for (const auto n : size) overflow = overflow || __builtin_mul_overflow(numel, n, &numel);
      }
      if (overflow) fail("tensor with invalid size or stride");
      if (!empty && (offset < 0 || last >= storage.numel()))
        fail("tensor view lies outside its storage");
      auto v = make(Value::Kind::kTensor);
      v->tensor =
          empty ? torch::empty(size, storage.options()) : storage.as_strided(size, stride, offset);
      push(v);
    } else if (callable->s == "torch._utils._rebuild_parameter") {
      if (args->items.empty() || args->items[0]->kind != Value::Kind::kTensor)
        fail("malformed _rebuild_parameter arguments");
      push(args->items[0]);
    } else {
      fail(fmt::format("refusing to call '{}'", callable->s));
    }
  }

  std::string_view data_;
  StorageSource storages_source_;
  std::string where_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::unordered_map<size_t, ValuePtr> memo_;
  std::unordered_map<std::string, torch::Tensor> storages_;
  uint64_t made_ = 0;  ///< values built so far
};

uint64_t little_endian(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int k = bytes; k-- > 0;) v = (v << 8) | p[k];
  return v;
}

/// The uncompressed size of every record of the zip archive at `path` (names without the
/// archive's top folder, as PyTorchStreamReader names them), read from its central directory,
/// each checked against what the file can hold, so that a size claimed by a hostile file is
/// never allocated. Zip64 records included. Written by hand: LibTorch's zip reader has no
/// public way to ask a record's size without reading it.
std::unordered_map<std::string, uint64_t> zip_record_sizes(const std::filesystem::path& path) {
  const std::string where = path.string();
  auto bad = [&](const std::string& what) {
    return CheckpointError(fmt::format("{}: malformed zip archive: {}", where, what));
  };
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  auto read_at = [&](uint64_t offset, uint64_t n) {
    if (offset > file_size || n > file_size - offset) throw bad("a record lies past the end");
    std::string bytes(n, '\0');
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(bytes.data(), static_cast<std::streamsize>(n));
    return bytes;
  };
  // The end-of-central-directory record: 22 bytes plus a comment of up to 65535.
  const uint64_t tail_size = std::min<uint64_t>(file_size, 22 + 65535);
  const std::string tail = read_at(file_size - tail_size, tail_size);
  size_t eocd = std::string::npos;
  for (size_t k = tail.size() >= 22 ? tail.size() - 22 + 1 : 0; k-- > 0;)
    if (tail.compare(k, 4, "PK\x05\x06") == 0) {
      eocd = k;
      break;
    }
  if (eocd == std::string::npos) throw bad("no end of central directory");
  const auto* e = reinterpret_cast<const unsigned char*>(tail.data() + eocd);
  uint64_t entries = little_endian(e + 10, 2), dir_size = little_endian(e + 12, 4),
           dir_offset = little_endian(e + 16, 4);
  if (entries == 0xFFFF || dir_size == 0xFFFFFFFF || dir_offset == 0xFFFFFFFF) {
    // Zip64: a locator just before the record points at the zip64 end of central directory.
    if (eocd < 20 || tail.compare(eocd - 20, 4, "PK\x06\x07") != 0)
      throw bad("zip64 sizes without a zip64 locator");
    const auto* l = reinterpret_cast<const unsigned char*>(tail.data() + eocd - 20);
    const std::string z = read_at(little_endian(l + 8, 8), 56);
    if (z.compare(0, 4, "PK\x06\x06") != 0) throw bad("no zip64 end of central directory");
    const auto* zp = reinterpret_cast<const unsigned char*>(z.data());
    entries = little_endian(zp + 32, 8);
    dir_size = little_endian(zp + 40, 8);
    dir_offset = little_endian(zp + 48, 8);
  }
  const std::string dir = read_at(dir_offset, dir_size);
  std::unordered_map<std::string, uint64_t> sizes;
  size_t pos = 0;
  for (uint64_t n = 0; n < entries; ++n) {
    if (dir.size() - pos < 46 || dir.compare(pos, 4, "PK\x01\x02") != 0)
      throw bad("a central directory entry is cut short");
    const auto* c = reinterpret_cast<const unsigned char*>(dir.data() + pos);
    const uint64_t method = little_endian(c + 10, 2), name_len = little_endian(c + 28, 2),
                   extra_len = little_endian(c + 30, 2), comment_len = little_endian(c + 32, 2);
    uint64_t compressed = little_endian(c + 20, 4), size = little_endian(c + 24, 4);
    if (dir.size() - pos - 46 < name_len + extra_len + comment_len)
      throw bad("a central directory entry is cut short");
    std::string name = dir.substr(pos + 46, name_len);
    // Zip64 extended information (id 1): the 8-byte sizes whose 4-byte fields are all ones.
    for (size_t x = pos + 46 + name_len; x + 4 <= pos + 46 + name_len + extra_len;) {
      const auto* f = reinterpret_cast<const unsigned char*>(dir.data() + x);
      const uint64_t id = little_endian(f, 2), len = little_endian(f + 2, 2);
      if (x + 4 + len > pos + 46 + name_len + extra_len) break;
      if (id == 1) {
        uint64_t at = 4;
        if (size == 0xFFFFFFFF && at + 8 <= 4 + len) size = little_endian(f + at, 8), at += 8;
        if (compressed == 0xFFFFFFFF && at + 8 <= 4 + len) compressed = little_endian(f + at, 8);
      }
      x += 4 + len;
    }
    pos += 46 + name_len + extra_len + comment_len;
    // Stored records hold their bytes as they are; deflate expands at most ~1032 times.
    const bool possible = method == 0 ? size == compressed && size <= file_size
                                      : compressed <= file_size && size / 1032 <= compressed;
    if (!possible)
      throw bad(
          fmt::format("record '{}' claims {} bytes in a file of {}", clip(name), size, file_size));
    const auto slash = name.find('/');
    sizes[slash == std::string::npos ? name : name.substr(slash + 1)] = size;
  }
  return sizes;
}

}  // namespace

namespace {

/// The state dict in the root value of a pickle.
TensorMap state_dict_of(const ValuePtr& root, const std::string& where) {
  if (root->kind != Value::Kind::kDict)
    throw CheckpointError(
        fmt::format("{}: the pickle is not a state dict (a dict of tensors)", where));
  TensorMap out;
  for (const auto& [key, value] : root->dict) {
    if (key->kind != Value::Kind::kString)
      throw CheckpointError(fmt::format("{}: state dict key is not a string", where));
    if (value->kind != Value::Kind::kTensor)
      throw CheckpointError(fmt::format("{}: entry '{}' is not a tensor", where, key->s));
    out.emplace(key->s, value->tensor);
  }
  return out;
}

/// Runs `f`, turning any other exception than CheckpointError into one naming `where`.
template <class F>
auto naming_errors(const std::string& where, F&& f) {
  try {
    return f();
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("{}: {}", where, message_of(e)));
  }
}

/// A file mapped read-only into memory.
class MappedFile {
 public:
  MappedFile(const std::filesystem::path& path, const std::string& where) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw CheckpointError(fmt::format("{}: cannot open", where));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      throw CheckpointError(fmt::format("{}: cannot stat", where));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        throw CheckpointError(fmt::format("{}: cannot map the file", where));
      }
      data_ = static_cast<const char*>(p);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return {data_, size_}; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

/// The first pickle of a legacy torch.save file: PROTO 2, then the magic number
/// 0x1950a86a20f9469cfc6c as a 10-byte LONG1, then STOP.
constexpr std::string_view kLegacyMagic{"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.",
                                        15};

/// torch.save's legacy (pre-1.6) layout: five pickles (magic number, protocol version 1001,
/// system info, the object, the list of storage keys), then each listed storage as an int64
/// element count and its raw little-endian bytes.
TensorMap load_legacy_state_dict(const std::filesystem::path& path, const std::string& where) {
  const MappedFile file(path, where);
  const std::string_view bytes = file.bytes();
  const auto no_storage = [&](const std::string& key, torch::ScalarType, int64_t,
                              const std::string&) -> torch::Tensor {
    throw CheckpointError(fmt::format("{}: storage '{}' outside the state dict", where, clip(key)));
  };
  return naming_errors(where, [&] {
    size_t pos = kLegacyMagic.size();
    RestrictedUnpickler version(bytes, no_storage, where, pos);
    const auto protocol = version.run();
    if (protocol->kind != Value::Kind::kInt || protocol->i != 1001)
      throw CheckpointError(fmt::format(
          "{}: legacy torch.save file with protocol {} (1001 expected)", where, protocol->i));
    RestrictedUnpickler system(bytes, no_storage, where, version.position());
    const auto info = system.run();
    for (const auto& [key, value] : info->dict)
      if (key->s == "little_endian" && value->kind == Value::Kind::kBool && value->i == 0)
        throw CheckpointError(fmt::format("{}: written on a big-endian machine", where));
    // Storages are allocated as the pickle names them and filled from the data that follows.
    std::unordered_map<std::string, torch::Tensor> pending;
    RestrictedUnpickler object(
        bytes,
        [&](const std::string& key, torch::ScalarType dtype, int64_t numel, const std::string&) {
          return pending.emplace(key, torch::empty({numel}, torch::TensorOptions().dtype(dtype)))
              .first->second;
        },
        where, system.position());
    TensorMap out = state_dict_of(object.run(), where);
    RestrictedUnpickler keys_pickle(bytes, no_storage, where, object.position());
    const auto keys = keys_pickle.run();
    if (keys->kind != Value::Kind::kList)
      throw CheckpointError(fmt::format("{}: no list of storage keys after the state dict", where));
    pos = keys_pickle.position();
    for (const auto& key : keys->items) {
      const auto it = key->kind == Value::Kind::kString ? pending.find(key->s) : pending.end();
      if (it == pending.end() || !it->second.defined())
        throw CheckpointError(
            fmt::format("{}: storage key '{}' is not one the state dict uses, or comes twice",
                        where, clip(key->s)));
      torch::Tensor storage = it->second;
      it->second = torch::Tensor();  // filled
      const uint64_t bytes_needed =
          static_cast<uint64_t>(storage.numel()) * static_cast<uint64_t>(storage.element_size());
      if (bytes.size() - pos < 8 ||
          little_endian(reinterpret_cast<const unsigned char*>(bytes.data() + pos), 8) !=
              static_cast<uint64_t>(storage.numel()))
        throw CheckpointError(
            fmt::format("{}: storage '{}' is not the {} elements its tensors need", where,
                        clip(key->s), storage.numel()));
      pos += 8;
      if (bytes.size() - pos < bytes_needed)
        throw CheckpointError(fmt::format("{}: truncated: storage '{}' needs {} bytes, {} left",
                                          where, clip(key->s), bytes_needed, bytes.size() - pos));
      if (bytes_needed > 0) std::memcpy(storage.data_ptr(), bytes.data() + pos, bytes_needed);
      pos += bytes_needed;
    }
    for (const auto& [key, storage] : pending)
      if (storage.defined())
        throw CheckpointError(fmt::format("{}: no data for storage '{}'", where, clip(key)));
    return out;
  });
}

}  // namespace

TensorMap load_torch_state_dict(const std::filesystem::path& path) {
  const std::string where = path.string();
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw CheckpointError(fmt::format("{}: cannot open", where));
    char magic[kLegacyMagic.size()] = {};
    in.read(magic, kLegacyMagic.size());
    if (in.gcount() == static_cast<std::streamsize>(kLegacyMagic.size()) &&
        std::string_view(magic, kLegacyMagic.size()) == kLegacyMagic)
      return load_legacy_state_dict(path, where);
    if (in.gcount() < 4 || std::memcmp(magic, "PK\x03\x04", 4) != 0)
      throw CheckpointError(fmt::format(
          "{}: not a torch.save file (neither the zip format nor the legacy one)", where));
  }
  auto record_sizes = zip_record_sizes(path);
  const auto pickle_size = record_sizes.find("data.pkl");
  if (pickle_size == record_sizes.end())
    throw CheckpointError(fmt::format("{}: zip archive has no data.pkl record", where));
  if (pickle_size->second > kMaxPickleBytes)
    throw CheckpointError(fmt::format("{}: data.pkl has {} bytes; a state dict's has far fewer",
                                      where, pickle_size->second));
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> archive;
  std::string pickle;
  try {
    archive = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path.string());
    if (!archive->hasRecord("data.pkl"))
      throw CheckpointError(fmt::format("{}: zip archive has no data.pkl record", where));
    auto [ptr, size] = archive->getRecord("data.pkl");
    pickle.assign(static_cast<const char*>(ptr.get()), size);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("{}: cannot read zip archive: {}", where, message_of(e)));
  }
  // Each storage is the record data/<key>, its size as the zip directory claims it checked
  // before it is read.
  const auto from_archive = [&](const std::string& key, torch::ScalarType dtype, int64_t numel,
                                const std::string& type) {
    const std::string record = "data/" + key;
    const auto fail = [&](const std::string& what) {
      return CheckpointError(fmt::format("{}: {}", where, what));
    };
    if (!archive->hasRecord(record)) throw fail(fmt::format("missing record '{}'", clip(record)));
    const auto claimed = record_sizes.find(record);
    const uint64_t element = c10::elementSize(dtype);
    if (claimed == record_sizes.end() || static_cast<uint64_t>(numel) > claimed->second / element ||
        static_cast<uint64_t>(numel) * element != claimed->second)
      throw fail(
          fmt::format("record '{}' does not hold {} elements of {}", clip(record), numel, type));
    auto [ptr, size] = archive->getRecord(record);
    const size_t expected = static_cast<size_t>(numel) * element;
    if (size != expected)
      throw fail(
          fmt::format("record '{}' has {} bytes, {} expected", clip(record), size, expected));
    torch::Tensor storage = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
    if (expected > 0) std::memcpy(storage.data_ptr(), ptr.get(), expected);
    return storage;
  };
  return state_dict_of(
      naming_errors(where, [&] { return RestrictedUnpickler(pickle, from_archive, where).run(); }),
      where);
}

}  // namespace bert
