#include "bert/common/signals.h"

#include <signal.h>
#include <time.h>

#include <atomic>

namespace bert {
namespace {

std::atomic<int> g_signal{0};
std::atomic<long long> g_first_ns{0};

long long now_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);  // async-signal-safe
  return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

void on_stop_signal(int sig) {
  int none = 0;
  if (g_signal.compare_exchange_strong(none, sig)) {
    g_first_ns = now_ns();
    return;
  }
  // A second request stops at once, unless it came within a second of the first: a parent's
  // death signal is sent again each time the kernel moves the child between the dying
  // parent's threads.
  if (now_ns() - g_first_ns.load() < 1000000000LL) return;
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install_stop_signals() {
  struct sigaction action {};
  action.sa_handler = &on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocking waitpid() returns to look at the flag
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

bool stop_signalled() {
  return g_signal.load() != 0;
}

int stop_signal() {
  return g_signal.load();
}

}  // namespace bert
