#include "tasks/training/distributed.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <thread>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#if __has_include(<gloo/algorithm.h>)  // pip's LibTorch ships Gloo compiled in, its headers not
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#define BERTFT_HAVE_GLOO 1
#endif
#include <torch/version.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "bert/common/log.h"
#include "bert/common/strings.h"

namespace bert::tasks {
namespace {

using namespace std::chrono_literals;

std::string key(const char* what, int rank) {
  return fmt::format("bertft/{}/{}", what, rank);
}

std::vector<uint8_t> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}
std::string text(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

/// False when process `pid` of this host has exited (gone, or a zombie its parent has not
/// reaped yet).
bool process_alive(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');  // "pid (name) state ..."
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

bool loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

}  // namespace

// ---- DistributedEnv -------------------------------------------------------------------------

bool cpu_data_parallel_available() {
#ifdef BERTFT_HAVE_GLOO
  return true;
#else
  return false;
#endif
}

std::string first_slurm_host(const std::string& nodelist) {
  // Up to the first comma outside brackets; within brackets the first value of the first range.
  std::string out;
  for (size_t i = 0; i < nodelist.size(); ++i) {
    const char c = nodelist[i];
    if (c == ',') break;
    if (c != '[') {
      out += c;
      continue;
    }
    const auto close = nodelist.find(']', i);
    const auto inner =
        nodelist.substr(i + 1, close == std::string::npos ? std::string::npos : close - i - 1);
    out += inner.substr(0, inner.find_first_of(",-"));
    if (close == std::string::npos) break;
    i = close;
  }
  return out;
}

std::optional<int> slurm_tasks_on_node(std::string_view list, int node) {
  int first = 0;  // the first node the current entry covers
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view entry = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (comma != std::string_view::npos && list.empty()) return std::nullopt;  // "2,"
    const size_t open = entry.find('(');
    const auto count = parse_count(entry.substr(0, open));
    std::optional<int> repeat = 1;
    if (open != std::string_view::npos) {
      const std::string_view times = entry.substr(open);  // "(xN)"
      repeat = times.size() > 3 && times.substr(0, 2) == "(x" && times.back() == ')'
                   ? parse_count(times.substr(2, times.size() - 3))
                   : std::nullopt;
    }
    if (!count || *count < 1 || !repeat || *repeat < 1) return std::nullopt;
    if (node < first + *repeat) return *count;
    first += *repeat;
  }
  return std::nullopt;
}

DistributedEnv DistributedEnv::from_environment(
    const std::function<const char*(const char*)>& getenv_fn) {
  const auto get = [&](const char* name) -> const char* {
    return getenv_fn ? getenv_fn(name) : std::getenv(name);
  };
  std::vector<std::string> problems;
  const auto number = [&](const char* name, int fallback) {
    const char* value = get(name);
    if (value == nullptr || *value == '\0') return fallback;
    if (const auto v = parse_count(value)) return *v;
    problems.push_back(fmt::format("environment variable {}='{}' is not a count", name, value));
    return fallback;
  };
  DistributedEnv env;
  if (get("RANK") != nullptr && get("WORLD_SIZE") != nullptr) {
    env.source = "torchrun";
    env.rank = number("RANK", 0);
    env.world_size = number("WORLD_SIZE", 1);
    env.local_rank = number("LOCAL_RANK", env.rank);
    env.local_world_size = number("LOCAL_WORLD_SIZE", env.world_size);
  } else if (get("SLURM_PROCID") != nullptr && get("SLURM_STEP_NUM_TASKS") != nullptr) {
    // A job step srun launched (a batch script has SLURM_PROCID and SLURM_NTASKS too, but is
    // one process: the step's own variables tell them apart).
    env.source = "slurm";
    env.rank = number("SLURM_PROCID", 0);
    env.world_size = number("SLURM_STEP_NUM_TASKS", 1);
    env.local_rank = number("SLURM_LOCALID", 0);
    // The step's list has an entry per node: this node's (SLURM_NODEID, its place in the step)
    // of "2", "2(x3)" or "2(x3),1" (three nodes of two tasks, then one of one). Without it,
    // --ntasks-per-node's one count for every node.
    if (const char* list = get("SLURM_STEP_TASKS_PER_NODE"); list != nullptr && *list != '\0') {
      const int node = number("SLURM_NODEID", 0);
      const auto tasks = slurm_tasks_on_node(list, node);
      if (tasks)
        env.local_world_size = *tasks;
      else
        problems.push_back(fmt::format(
            "environment variable SLURM_STEP_TASKS_PER_NODE='{}' has no task count for node {} "
            "(SLURM_NODEID)",
            list, node));
    } else {
      env.local_world_size = std::max(1, number("SLURM_NTASKS_PER_NODE", 1));
    }
    if (get("MASTER_ADDR") == nullptr) {
      for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
        if (const char* nodes = get(name); nodes && *nodes) {
          env.master_addr = first_slurm_host(nodes);
          break;
        }
    }
  }
  if (const char* agent = get("TORCHELASTIC_USE_AGENT_STORE");
      agent && std::string(agent) == "True") {
    env.agent_store = true;
    env.restart_count = number("TORCHELASTIC_RESTART_COUNT", 0);
  }
  if (const char* addr = get("MASTER_ADDR"); addr && *addr) env.master_addr = addr;
  env.master_port = number("MASTER_PORT", env.master_port);
  if (const char* file = get("BERTFT_DIST_FILE"); file && *file) env.store_file = file;
  if (env.world_size < 1) problems.push_back("WORLD_SIZE must be >= 1");
  if (env.rank >= env.world_size)
    problems.push_back(fmt::format("rank {} is not below the world size {} ({} variables)",
                                   env.rank, env.world_size, env.source));
  if (env.master_port < 1 || env.master_port > 65535)
    problems.push_back(fmt::format("MASTER_PORT {} is not a TCP port", env.master_port));
  if (!problems.empty()) throw ConfigError(problems);
  return env;
}

// ---- DataParallel ---------------------------------------------------------------------------

// LibTorch 2.x makes Gloo and NCCL backends of a ProcessGroup; their collectives are the same
// calls, made on the backend directly (a CUDA build of a newer LibTorch compiles this file too).
#if TORCH_VERSION_MAJOR >= 2
using GroupImpl = c10d::Backend;
#else
using GroupImpl = c10d::ProcessGroup;
#endif

struct DataParallel::Impl {
  DistributedEnv env;
  DataParallelOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Store> beat_store;  ///< the heartbeat thread's own client
  c10::intrusive_ptr<GroupImpl> group;
  /// Where the collectives' tensors must be: the GPU for NCCL (it takes no CPU tensors), the
  /// CPU for Gloo. Values on another device travel there and back.
  torch::Device comm_device = torch::kCPU;
  std::string host = hostname();
  std::thread heartbeat;
  std::mutex beat_mutex;
  std::condition_variable beat_cv;
  bool stopping = false;

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(beat_mutex);
      stopping = true;
    }
    beat_cv.notify_all();
    if (heartbeat.joinable()) heartbeat.join();
  }

  /// The main store (rank 0 serves it; everyone waits for everyone), or one more client of it.
  c10::intrusive_ptr<c10d::Store> open_store(bool main, std::chrono::milliseconds timeout) const {
    if (!env.store_file.empty()) {
      auto store = c10::make_intrusive<c10d::FileStore>(env.store_file.string(), env.world_size);
      store->setTimeout(timeout);
      return store;
    }
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(env.master_port);
    o.isServer = main && env.rank == 0 && !env.agent_store;
    o.numWorkers =
        main && !env.agent_store ? c10::optional<std::size_t>(env.world_size) : c10::nullopt;
    o.waitWorkers = main && !env.agent_store;
    o.timeout = timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
    if (!env.agent_store) return store;
    return c10::make_intrusive<c10d::PrefixStore>(
        fmt::format("/worker/attempt_{}", env.restart_count), store);
  }

  void beat() {
    try {
      std::unique_lock<std::mutex> lock(beat_mutex);
      while (!stopping) {
        lock.unlock();
        beat_store->add(key("beat", env.rank), 1);
        lock.lock();
        beat_cv.wait_for(lock, options.heartbeat, [&] { return stopping; });
      }
    } catch (const std::exception&) {
      // The store is gone (the job is ending or rank 0 was lost): the collectives will say so.
    }
  }

  /// Which rank is lost, asked of the store: a failure a rank reported, a rank on this host
  /// whose process is gone, a rank whose heartbeat stopped; or rank 0 when its store is gone.
  std::string diagnose() const {
    const auto& me = env.rank;
    std::vector<std::string> findings;
    try {
      auto probe = open_store(/*main=*/false, 5000ms);
      for (int r = 0; r < env.world_size; ++r)
        if (r != me && probe->check({key("failed", r)}))
          findings.push_back(
              fmt::format("rank {} failed: {}", r, text(probe->get(key("failed", r)))));
      if (!findings.empty()) return fmt::format("{}", fmt::join(findings, "; "));
      for (int r = 0; r < env.world_size; ++r) {
        if (r == me || !probe->check({key("host", r), key("pid", r)})) continue;
        const auto pid = std::atoi(text(probe->get(key("pid", r))).c_str());
        if (text(probe->get(key("host", r))) == host && pid > 0 && !process_alive(pid))
          findings.push_back(
              fmt::format("lost rank {}: its process (pid {} on {}) has exited", r, pid, host));
      }
      if (!findings.empty()) return fmt::format("{}", fmt::join(findings, "; "));
      std::vector<int64_t> before(static_cast<size_t>(env.world_size));
      for (int r = 0; r < env.world_size; ++r)
        before[r] = r == me ? 0 : probe->add(key("beat", r), 0);
      const auto wait = std::max<std::chrono::milliseconds>(3 * options.heartbeat, 3000ms);
      std::this_thread::sleep_for(wait);
      for (int r = 0; r < env.world_size; ++r)
        if (r != me && probe->add(key("beat", r), 0) == before[r])
          findings.push_back(fmt::format("lost rank {}: no heartbeat for {} s", r,
                                         std::chrono::duration<double>(wait).count()));
    } catch (const std::exception&) {
      if (me != 0)
        return fmt::format("lost rank 0: the rendezvous store it serves at {}:{} does not answer",
                           env.master_addr, env.master_port);
    }
    if (findings.empty())
      return "every rank is alive; the others did not take part in time (a hang or a timeout "
             "of " +
             std::to_string(options.timeout.count() / 1000) + " s)";
    return fmt::format("{}", fmt::join(findings, "; "));
  }
};

DataParallel::DataParallel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DataParallel::~DataParallel() = default;

std::shared_ptr<DataParallel> DataParallel::connect(const DistributedEnv& env,
                                                    const torch::Device& device,
                                                    DataParallelOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->env = env;
  impl->options = options;
  try {
    impl->store = impl->open_store(/*main=*/true, options.timeout);
  } catch (const std::exception& e) {
    throw DistributedError(fmt::format(
        "rank {} of {}: cannot meet the others at {}:{} within {} s (is rank 0 running, and "
        "MASTER_ADDR/MASTER_PORT right?): {}",
        env.rank, env.world_size,
        env.store_file.empty() ? env.master_addr : env.store_file.string(), env.master_port,
        options.timeout.count() / 1000, e.what()));
  }
  if (device.is_cuda()) {
#ifdef USE_C10D_NCCL
    auto o = c10d::ProcessGroupNCCL::Options::create();
    o->timeout = options.timeout;
    impl->group =
        c10::make_intrusive<c10d::ProcessGroupNCCL>(impl->store, env.rank, env.world_size, o);
    impl->comm_device = device;
#else
    throw ConfigError(
        "data-parallel training on CUDA needs NCCL, and this LibTorch was built without it");
#endif
  } else {
#ifndef BERTFT_HAVE_GLOO
    throw ConfigError(
        "data-parallel training on CPU needs Gloo, and this LibTorch ships no Gloo headers");
#else
    auto o = c10d::ProcessGroupGloo::Options::create(options.timeout);
    if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface) {
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
    } else if (loopback(env.master_addr) || !env.store_file.empty()) {
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      o->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    impl->group =
        c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, env.rank, env.world_size, o);
#endif
  }
  impl->store->set(key("host", env.rank), bytes(impl->host));
  impl->store->set(key("pid", env.rank), bytes(std::to_string(::getpid())));
  impl->beat_store = impl->open_store(/*main=*/false, options.timeout);
  auto* raw = impl.get();
  impl->heartbeat = std::thread([raw] { raw->beat(); });
  log::set_rank(env.rank);
  log::info("[dist] rank {} of {} ({}, {} variables; rendezvous {})", env.rank, env.world_size,
            device.is_cuda() ? "nccl" : "gloo", env.source.empty() ? "no" : env.source,
            env.store_file.empty() ? fmt::format("{}:{}", env.master_addr, env.master_port)
                                   : env.store_file.string());
  return std::shared_ptr<DataParallel>(new DataParallel(std::move(impl)));
}

int DataParallel::rank() const {
  return impl_->env.rank;
}
int DataParallel::world_size() const {
  return impl_->env.world_size;
}
const DataParallelOptions& DataParallel::options() const {
  return impl_->options;
}

void DataParallel::guarded(const std::string& what, const std::function<void()>& collective) {
  try {
    collective();
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    std::string error = e.what();
    error = error.substr(0, error.find('\n'));
    throw DistributedError(
        fmt::format("rank {}: {} failed: {} ({})", rank(), what, impl_->diagnose(), error));
  }
}

void DataParallel::broadcast_module(torch::nn::Module& module) {
  std::vector<torch::Tensor> tensors;
  for (const auto& p : module.parameters()) tensors.push_back(p);
  for (const auto& b : module.buffers()) tensors.push_back(b);
  torch::NoGradGuard no_grad;
  // One broadcast per dtype of everything flattened.
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_type;
  for (const auto& t : tensors) by_type[t.scalar_type()].push_back(t);
  for (auto& [type, group] : by_type) {
    std::vector<torch::Tensor> flat;
    for (const auto& t : group) flat.push_back(t.reshape({-1}));
    std::vector<torch::Tensor> buffer = {torch::cat(flat).to(impl_->comm_device)};
    guarded("broadcast of the parameters", [&] { impl_->group->broadcast(buffer)->wait(); });
    int64_t offset = 0;
    for (auto& t : group) {
      t.copy_(buffer[0].narrow(0, offset, t.numel()).view_as(t));
      offset += t.numel();
    }
  }
}

void DataParallel::all_reduce_sum(torch::Tensor& values) {
  std::vector<torch::Tensor> v = {values.to(impl_->comm_device)};
  guarded("all-reduce", [&] { impl_->group->allreduce(v)->wait(); });
  if (!v[0].is_same(values)) values.copy_(v[0]);
}

std::vector<torch::Tensor> DataParallel::all_gather(const torch::Tensor& tensor) {
  const auto flat = tensor.reshape({-1}).contiguous().to(impl_->comm_device);
  const auto on_comm = torch::TensorOptions().dtype(torch::kLong).device(impl_->comm_device);
  // Lengths first, then everyone's data padded to the longest.
  std::vector<torch::Tensor> mine_length = {torch::tensor({flat.numel()}, on_comm)};
  std::vector<std::vector<torch::Tensor>> lengths(1);
  for (int r = 0; r < world_size(); ++r) lengths[0].push_back(torch::zeros({1}, on_comm));
  guarded("all-gather", [&] { impl_->group->allgather(lengths, mine_length)->wait(); });
  int64_t longest = 0;
  for (const auto& l : lengths[0]) longest = std::max(longest, l.item<int64_t>());
  std::vector<torch::Tensor> padded = {torch::zeros({longest}, flat.options())};
  padded[0].narrow(0, 0, flat.numel()).copy_(flat);
  std::vector<std::vector<torch::Tensor>> gathered(1);
  for (int r = 0; r < world_size(); ++r)
    gathered[0].push_back(torch::empty({longest}, flat.options()));
  guarded("all-gather", [&] { impl_->group->allgather(gathered, padded)->wait(); });
  std::vector<torch::Tensor> out;
  for (int r = 0; r < world_size(); ++r)
    out.push_back(gathered[0][static_cast<size_t>(r)]
                      .narrow(0, 0, lengths[0][r].item<int64_t>())
                      .to(tensor.device()));
  return out;
}

void DataParallel::all_gather_outputs(std::vector<torch::Tensor>& outputs,
                                      const std::vector<int64_t>& mine) {
  // meta: per output [index, ndim, dims...]; data: the values, flattened.
  std::vector<int64_t> meta;
  std::vector<torch::Tensor> values;
  for (const auto i : mine) {
    const auto& t = outputs.at(static_cast<size_t>(i));
    meta.push_back(i);
    meta.push_back(t.dim());
    for (const auto d : t.sizes()) meta.push_back(d);
    values.push_back(t.to(torch::kFloat).reshape({-1}));
  }
  const auto all_meta = all_gather(torch::tensor(meta, torch::kLong));
  const auto all_values =
      all_gather(values.empty() ? torch::zeros({0}, torch::kFloat) : torch::cat(values));
  for (size_t r = 0; r < all_meta.size(); ++r) {
    const auto m = all_meta[r].contiguous();
    const auto* p = m.data_ptr<int64_t>();
    const auto* end = p + m.numel();
    int64_t offset = 0;
    while (p < end) {
      const auto index = *p++;
      const auto dims = *p++;
      std::vector<int64_t> shape(p, p + dims);
      p += dims;
      int64_t numel = 1;
      for (const auto d : shape) numel *= d;
      outputs.at(static_cast<size_t>(index)) =
          all_values[r].narrow(0, offset, numel).view(shape).clone();
      offset += numel;
    }
  }
}

void DataParallel::barrier() {
  guarded("barrier", [&] { impl_->group->barrier()->wait(); });
}

void DataParallel::report_failure(const std::string& message) {
  try {
    impl_->store->setTimeout(std::chrono::milliseconds(3000));
    impl_->store->set(key("failed", rank()), bytes(message.substr(0, 500)));
  } catch (const std::exception&) {
    // Nobody to tell.
  }
}

std::unique_ptr<GradientSync> DataParallel::sync_gradients(std::vector<torch::Tensor> parameters) {
  return std::make_unique<GradientSync>(*this, std::move(parameters), impl_->options.bucket_bytes,
                                        impl_->options.overlap);
}

// ---- GradientSync ---------------------------------------------------------------------------

struct GradientSync::Bucket {
  torch::Tensor flat;           ///< the members' gradients, back to back
  std::vector<size_t> members;  ///< parameter indices
  size_t pending = 0;           ///< members not ready in this step
  c10::intrusive_ptr<c10d::Work> work;
};

namespace {

/// Runs after a parameter's gradient was accumulated into .grad (DDP's hook point).
class ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::function<void()> ready) : ready_(std::move(ready)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    ready_();
    return outputs;
  }

 private:
  std::function<void()> ready_;
};

}  // namespace

GradientSync::GradientSync(DataParallel& group,
                           std::vector<torch::Tensor> parameters,
                           int64_t bucket_bytes,
                           bool overlap)
    : group_(group), parameters_(std::move(parameters)), overlap_(overlap) {
  // Backward produces the last layers' gradients first: buckets in reverse parameter order,
  // the first one small so that communication starts early (as DDP does).
  slot_.resize(parameters_.size());
  int64_t cap = std::min<int64_t>(bucket_bytes, 1 << 20);
  std::vector<size_t> members;
  int64_t bytes = 0;
  const auto close = [&] {
    if (members.empty()) return;
    auto bucket = std::make_unique<Bucket>();
    int64_t numel = 0;
    for (const auto i : members) {
      slot_[i] = {buckets_.size(), numel};
      numel += parameters_[i].numel();
    }
    bucket->flat = torch::zeros({numel}, parameters_[members.front()].options());
    bucket->members = members;
    bucket->pending = members.size();
    buckets_.push_back(std::move(bucket));
    members.clear();
    bytes = 0;
    cap = bucket_bytes;
  };
  for (size_t k = parameters_.size(); k-- > 0;) {
    const auto& p = parameters_[k];
    if (!members.empty() && (bytes + p.nbytes() > static_cast<size_t>(cap) ||
                             p.scalar_type() != parameters_[members.front()].scalar_type() ||
                             p.device() != parameters_[members.front()].device()))
      close();
    members.push_back(k);
    bytes += static_cast<int64_t>(p.nbytes());
  }
  close();
  // Gradients live in the buckets (no copies), accumulated in place by autograd.
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto& p = parameters_[i];
    const auto [b, offset] = slot_[i];
    auto view = buckets_[b]->flat.narrow(0, offset, p.numel()).view_as(p);
    if (p.grad().defined()) view.copy_(p.grad());
    p.mutable_grad() = view;
    auto accumulator = torch::autograd::impl::grad_accumulator(p);
    hook_keys_.push_back(
        accumulator->add_post_hook(std::make_unique<ReadyHook>([this, i] { ready(i); })));
    accumulators_.push_back(std::move(accumulator));
  }
}

GradientSync::~GradientSync() {
  // Leave the model as it was: without our hooks.
  for (size_t i = 0; i < accumulators_.size(); ++i)
    static_cast<torch::autograd::Node*>(accumulators_[i].get())->del_post_hook(hook_keys_[i]);
}

size_t GradientSync::buckets() const {
  return buckets_.size();
}

void GradientSync::ensure_view(size_t i) {
  auto& p = parameters_[i];
  const auto [b, offset] = slot_[i];
  const auto& flat = buckets_[b]->flat;
  const auto* start = static_cast<const char*>(flat.data_ptr()) + offset * flat.element_size();
  if (p.grad().defined() && p.grad().data_ptr() == start) return;
  // Autograd replaced .grad (or there was none): bring it back into the bucket.
  torch::NoGradGuard no_grad;
  auto view = flat.narrow(0, offset, p.numel()).view_as(p);
  if (p.grad().defined()) {
    view.copy_(p.grad());
  } else {
    view.zero_();
  }
  p.mutable_grad() = view;
}

void GradientSync::ready(size_t i) {
  if (!sync_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ensure_view(i);
  auto& bucket = *buckets_[slot_[i].first];
  if (bucket.pending > 0 && --bucket.pending == 0 && overlap_) launch_ready_buckets();
}

void GradientSync::launch_ready_buckets() {
  // In bucket order, the same on every rank (collectives pair up by order).
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_]->pending == 0) {
    auto& bucket = *buckets_[next_bucket_++];
    std::vector<torch::Tensor> tensors = {bucket.flat};
    group_.guarded("gradient all-reduce",
                   [&] { bucket.work = group_.impl_->group->allreduce(tensors); });
  }
}

double GradientSync::finish() {
  const auto start = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Parameters backward did not reach (none on a rank without examples this step) count
    // with what .grad holds: the earlier micro-batches' sum, or zeros.
    for (size_t b = next_bucket_; b < buckets_.size(); ++b) {
      for (const auto i : buckets_[b]->members) ensure_view(i);
      buckets_[b]->pending = 0;
    }
    launch_ready_buckets();
  }
  for (auto& bucket : buckets_) {
    group_.guarded("gradient all-reduce", [&] { bucket->work->wait(); });
    bucket->work.reset();
    bucket->pending = bucket->members.size();
  }
  next_bucket_ = 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace bert::tasks
