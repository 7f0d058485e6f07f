#include "bench/sim_profile.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/memory.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/models/zoo.h"
#include "nn/sequential.h"
#include "optim/optimizer.h"
#include "parallel/stages.h"

namespace cohort::sim {

int64_t Profile::params() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.params;
  return n;
}

double Profile::refill_for(double bytes) const {
  return bytes < double(kHugePagesFrom) && refill_small > 0 ? refill_small : refill;
}

double Profile::send_refilled_for(double bytes) const {
  return bytes < double(kHugePagesFrom) ? send_refilled : 0.0;
}

double Profile::read_received_for(double bytes) const {
  return bytes < double(kHugePagesFrom) ? read_received : 0.0;
}

double Profile::forward() const {
  double t = 0;
  for (const auto& l : layers) t += l.forward;
  return t;
}

double Profile::backward() const {
  double t = 0;
  for (const auto& l : layers) t += l.backward;
  return t;
}

Profile Profile::at_batch(int64_t rows) const {
  Profile p = *this;
  const double k = double(rows) / double(batch);
  p.batch = rows;
  for (auto& l : p.layers) l.forward *= k, l.backward *= k;
  return p;
}

namespace {

// Seconds of the loss and its gradient on the model's output for `rows`
// samples (best of three).
double time_loss(nn::Model& model, int64_t rows) {
  Shape in = {rows};
  for (int64_t d : model.input_shape()) in.push_back(d);
  const Shape out = model.layers().output_shape(in);
  Tensor y = Tensor::empty(out), dy;
  Rng rng(3);
  for (int64_t i = 0; i < y.numel(); ++i) y.f32()[i] = rng.uniform(-1.0f, 1.0f);
  const int64_t positions = model.spec().input.kind == nn::InputKind::kTokens ? in[1] : 1;
  std::vector<int32_t> targets(size_t(rows * positions));
  for (auto& t : targets) t = int32_t(rng.below(uint64_t(model.num_classes())));
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    Timer t;
    model.loss().compute(y, targets.data(), &dy, 1.0f / float(rows));
    best = std::min(best, t.seconds());
  }
  return best;
}

double time_optimizer(nn::Model& model) {
  auto opt = make_optimizer("adam", 0, 0);
  Arena& a = model.params();
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    Timer t;
    opt->step(a.params().f32(), a.grads().f32(), a.size(), 0.0f);
    if (rep > 0) best = std::min(best, t.seconds());
  }
  return best;
}

// Seconds per byte of a copy into released pages of a mapping of `bytes`, as
// ZeRO-3 refills a gathered layer (core/memory.h: huge pages from
// kHugePagesFrom): best of 5.
double time_refill(size_t bytes) {
  auto dst = allocate_pages(bytes), src = allocate_pages(bytes);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 1, bytes);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    release_pages(dst.get(), bytes, false);
    Timer t;
    std::memcpy(dst.get(), src.get(), bytes);
    best = std::min(best, t.seconds());
  }
  return best / double(bytes);
}

// Writes [p, p + bytes) to `fd` in writes of at most `piece` bytes; false
// if a write fails.
bool write_all(int fd, const char* p, size_t bytes, size_t piece) {
  for (size_t off = 0; off < bytes;) {
    const ssize_t w = write(fd, p + off, std::min(piece, bytes - off));
    if (w <= 0) return false;
    off += size_t(w);
  }
  return true;
}

// Reads `bytes` bytes from `fd` into p; false if the stream fails or ends first.
bool read_all(int fd, char* p, size_t bytes) {
  for (size_t got = 0; got < bytes;) {
    const ssize_t r = read(fd, p + got, bytes - got);
    if (r <= 0) return false;
    got += size_t(r);
  }
  return true;
}

// Seconds per byte the kernel adds to a send of pages just refilled, in
// 4 KiB pages (a mapping of `bytes`, under kHugePagesFrom): a socket pair
// drained by a thread, the pages released and rewritten, then sent twice;
// the first send's time over the second's. Best of 3 of each.
double time_send_refilled(size_t bytes) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  std::thread drain([fd = sv[1]] {
    std::vector<char> sink(size_t(1) << 20);
    while (read(fd, sink.data(), sink.size()) > 0) {
    }
  });
  auto buf = allocate_pages(bytes);
  char* p = static_cast<char*>(buf.get());
  const auto send_all = [&] {
    Timer t;
    write_all(sv[0], p, bytes, size_t(256) << 10);  // in ring segments
    return t.seconds();
  };
  double first = 1e30, again = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    release_pages(p, bytes, false);
    std::memset(p, rep + 1, bytes);
    first = std::min(first, send_all());
    again = std::min(again, send_all());
  }
  close(sv[0]);
  drain.join();
  close(sv[1]);
  return std::max(0.0, first - again) / double(bytes);
}

// Seconds per byte a process adds to its first read of pages the kernel
// filled from a socket, in 4 KiB pages (a mapping of `bytes`, under
// kHugePagesFrom): the pages released, received whole from a socket pair
// (a thread sends them), then copied out twice; the first copy's time
// over the second's. Best of 3 of each.
double time_read_received(size_t bytes) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  auto buf = allocate_pages(bytes), out = allocate_pages(bytes), src = allocate_pages(bytes);
  char* p = static_cast<char*>(buf.get());
  std::memset(src.get(), 1, bytes);
  std::memset(out.get(), 1, bytes);
  const auto copy_out = [&] {
    Timer t;
    std::memcpy(out.get(), p, bytes);
    return t.seconds();
  };
  double first = 1e30, again = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    release_pages(p, bytes, false);
    std::thread send([&, fd = sv[1]] {
      write_all(fd, static_cast<const char*>(src.get()), bytes, bytes);
    });
    const bool got = read_all(sv[0], p, bytes);
    send.join();
    if (!got) break;
    first = std::min(first, copy_out());
    again = std::min(again, copy_out());
  }
  close(sv[0]);
  close(sv[1]);
  return first < 1e30 ? std::max(0.0, first - again) / double(bytes) : 0.0;
}

// Pins the calling thread to `core`.
void pin_to(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// A thread pinned to `core` that spins until destroyed: the busy thread
// both core-sharing measurements wait beside.
class Spinner {
 public:
  explicit Spinner(int core)
      : thread_([this, core] {
          pin_to(core);
          while (!stop_.load(std::memory_order_relaxed)) {
          }
        }) {}
  ~Spinner() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Seconds a yielding thread waits while a busy thread on its core runs:
// both pinned to one core, the yielder yields 200 times, spinning 20 us
// between (a poll); the median of the yields that handed the core over
// (longer than 100 us: a yield the scheduler refuses returns in
// microseconds). 0 where none did, or where the core is unknown.
double time_handover() {
  const int cpu = sched_getcpu();
  if (cpu < 0) return 0;
  std::vector<double> waits;
  const Spinner busy(cpu);
  std::thread yielder([&] {
    pin_to(cpu);
    for (int i = 0; i < 200; ++i) {
      Timer t;
      sched_yield();
      if (t.seconds() > 100e-6) waits.push_back(t.seconds());
      for (Timer spin; spin.seconds() < 20e-6;) {
      }
    }
  });
  yielder.join();
  if (waits.empty()) return 0;
  std::nth_element(waits.begin(), waits.begin() + waits.size() / 2, waits.end());
  return waits[waits.size() / 2];
}

// The top-level layer holding parameter offset `at` (the arena's order).
size_t layer_at(nn::Sequential& layers, int64_t at) {
  size_t i = 0;
  while (i + 1 < layers.size() && at >= layers.child(i).param_end()) ++i;
  return i;
}

// Each tie's owner layer and the layer that reads it (named by its
// parameter's prefix; the last layer if none is).
std::vector<Profile::Tie> describe_ties(nn::Model& model) {
  nn::Sequential& layers = model.layers();
  std::vector<Profile::Tie> ties;
  for (const auto& tie : model.params().ties()) {
    const ParamInfo& owner = model.params().infos()[tie.owner];
    Profile::Tie t{layers.size() - 1, layer_at(layers, owner.offset), owner.numel()};
    for (size_t i = 0; i < layers.size(); ++i)
      if (!layers.child_name(i).empty() && tie.name.rfind(layers.child_name(i) + ".", 0) == 0)
        t.layer = i;
    ties.push_back(t);
  }
  return ties;
}

// Names, parameters, activation bytes and FLOPs of the model's top-level
// layers (times left at 0), and its ties.
Profile describe_layers(nn::Model& model, const std::string& name, int64_t batch) {
  Profile p;
  p.model = name;
  p.batch = batch;
  const bool tokens = model.spec().input.kind == nn::InputKind::kTokens;
  p.positions = tokens ? model.input_shape()[0] : 1;
  nn::Sequential& layers = model.layers();
  Shape s = {1};
  for (int64_t d : model.input_shape()) s.push_back(d);
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerCost l;
    l.name = layers.child_name(i).empty() ? "layer" + std::to_string(i) : layers.child_name(i);
    l.params = layers.child(i).num_params();
    l.flops = layers.child(i).flops(Shape(s.begin() + 1, s.end()));
    s = layers.child(i).output_shape(s);
    l.out_bytes = 4.0 * double(numel(s));
    p.layers.push_back(l);
  }
  // Tied parameters (GPT-2's lm_head) are counted once, by their owner.
  const int64_t listed = p.params();
  if (listed != model.num_params() && !p.layers.empty())
    p.layers.back().params -= listed - model.num_params();
  p.ties = describe_ties(model);
  return p;
}

}  // namespace

// Profile::poll_wait: a poller with comm::idle's policy and a spinning
// thread pinned to one core; a third thread on another core sets the
// flag 0.2-8 ms (uniform, fixed seed) after the poller began to wait, 200
// times; the mean of the delays until the poller saw it. 0 with one core.
double time_poll_wait() {
  const int cpu = sched_getcpu();
  const int other = cpu == 0 ? 1 : 0;
  if (cpu < 0 || other >= int(std::thread::hardware_concurrency())) return 0;
  std::atomic<int> posted{0}, seen{0};
  std::atomic<double> posted_at{0};
  double total = 0;
  constexpr int kTimes = 200;
  const Timer clock;
  const Spinner busy(cpu);
  std::thread poller([&] {
    pin_to(cpu);
    for (int i = 1; i <= kTimes; ++i) {
      for (int round = 0; posted.load() < i; ++round) comm::idle(round);
      total += clock.seconds() - posted_at.load();
      seen = i;
    }
  });
  std::thread poster([&] {
    pin_to(other);
    Rng rng(48);
    for (int i = 1; i <= kTimes; ++i) {
      const double delay = 0.2e-3 + 7.8e-3 * rng.uniform();
      for (Timer t; t.seconds() < delay;) {
      }
      posted_at = clock.seconds();
      posted = i;
      while (seen.load() < i) {
      }
    }
  });
  poller.join();
  poster.join();
  return total / kTimes;
}

double spread_of(std::vector<double> passes) {
  if (passes.size() < 4) return 0;
  std::sort(passes.begin(), passes.end());
  auto at = [&](double q) {  // linear interpolation between order statistics
    const double x = q * double(passes.size() - 1);
    const size_t i = size_t(x);
    const double w = x - double(i);
    return i + 1 < passes.size() ? passes[i] * (1 - w) + passes[i + 1] * w : passes[i];
  };
  const double median = at(0.5);
  return median > 0 ? (at(0.75) - at(0.25)) / 1.349 / median : 0;
}

Profile measure_profile(const std::string& name, int64_t seq, int64_t vocab, int64_t batch,
                        int threads) {
  COHORT_INPUT_CHECK(batch >= 1, "--batch must be at least 1, got ", batch);
  omp_set_num_threads(threads);
  auto model = nn::build_model(nn::find_model(name, seq, vocab), 0);
  // Best of 32 after a warm-up: other processes on the machine only ever
  // add time. The 32 passes' totals give the step's spread (16 read 0.03 to
  // 0.10 for mnist-large in three runs a minute apart).
  const LayerTimes t = time_layers_split(*model, batch, 33);
  Profile p = describe_layers(*model, name, batch);
  p.threads = threads;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    p.layers[i].forward = t.forward[i];
    p.layers[i].backward = t.backward[i];
  }
  const double loss = time_loss(*model, batch);
  p.layers.back().forward += loss / 2;  // the loss and its gradient are one pass
  p.layers.back().backward += loss / 2;
  p.optimizer = time_optimizer(*model);
  p.refill = time_refill(2 * kHugePagesFrom);
  p.refill_small = time_refill(kHugePagesFrom / 4);
  p.send_refilled = time_send_refilled(kHugePagesFrom / 4);
  p.read_received = time_read_received(kHugePagesFrom / 4);
  p.handover = time_handover();
  p.poll_wait = time_poll_wait();
  p.step_spread = spread_of(t.passes);
  return p;
}

void attach_leaves(Profile& p, int64_t seq, int64_t vocab) {
  std::unique_ptr<nn::Sequential> layers = nn::find_model(p.model, seq, vocab)->layers();
  Arena params, buffers;
  nn::ParamRegistry reg{&params, &buffers};
  layers->register_params(reg, "");
  if (layers->size() != p.layers.size()) return;
  for (size_t i = 0; i < layers->size(); ++i) {
    std::vector<const nn::Module*> leaves;
    layers->child(i).collect_leaves(leaves);
    p.layers[i].leaves.clear();
    for (const nn::Module* l : leaves) p.layers[i].leaves.push_back(l->num_params());
  }
}

Profile flops_profile(const std::string& name, int64_t seq, int64_t vocab, int64_t batch,
                      double gflops) {
  COHORT_INPUT_CHECK(batch >= 1, "--batch must be at least 1, got ", batch);
  COHORT_INPUT_CHECK(gflops > 0, "--compute flops:RATE: the rate must be positive GFLOP/s");
  auto model = nn::build_model(nn::find_model(name, seq, vocab), 0);
  Profile p = describe_layers(*model, name, batch);
  p.source = "flops at " + std::to_string(int64_t(gflops)) + " GFLOP/s";
  for (auto& l : p.layers) {
    l.forward = l.flops * double(batch) / (gflops * 1e9);
    l.backward = 2 * l.forward;  // input and weight gradients: two products per forward one
  }
  return p;
}

void save_profile(const Profile& p, const std::string& path) {
  nlohmann::ordered_json j = {{"model", p.model}, {"batch", p.batch}, {"positions", p.positions},
                              {"threads", p.threads}, {"optimizer_s", p.optimizer},
                              {"refill_s_per_byte", p.refill},
                              {"refill_small_s_per_byte", p.refill_small},
                              {"send_refilled_s_per_byte", p.send_refilled},
                              {"read_received_s_per_byte", p.read_received},
                              {"handover_s", p.handover}, {"poll_wait_s", p.poll_wait},
                              {"step_spread", p.step_spread}};
  j["layers"] = nlohmann::ordered_json::array();
  for (const auto& l : p.layers)
    j["layers"].push_back({{"name", l.name}, {"forward_s", l.forward}, {"backward_s", l.backward},
                           {"params", l.params}, {"out_bytes", l.out_bytes}, {"flops", l.flops}});
  if (!p.ties.empty()) {
    j["ties"] = nlohmann::ordered_json::array();
    for (const auto& t : p.ties)
      j["ties"].push_back({{"layer", t.layer}, {"owner", t.owner}, {"params", t.params}});
  }
  const std::string text = j.dump(1) + "\n";
  check_writable("--save-compute", path);
  AtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

namespace {

template <typename T>
T key(const nlohmann::json& j, const char* name, const std::string& path, const std::string& where) {
  COHORT_INPUT_CHECK(j.contains(name), "--compute ", path, ": ", where, " has no \"", name, "\"");
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw InputError("--compute " + path + ": " + where + "'s \"" + name + "\" has the wrong type");
  }
}

// A machine figure a profile may lack (0: not measured); never negative.
double optional_figure(const nlohmann::json& j, const char* name, const std::string& path) {
  const double v = j.value(name, 0.0);
  COHORT_INPUT_CHECK(v >= 0, "--compute ", path, ": ", name, " is negative");
  return v;
}

std::vector<Profile::Tie> load_ties(const nlohmann::json& j, size_t layers, const std::string& path) {
  COHORT_INPUT_CHECK(j.is_array(), "--compute ", path, ": \"ties\" must be an array");
  std::vector<Profile::Tie> ties;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string where = "tie " + std::to_string(i);
    Profile::Tie t{key<size_t>(j[i], "layer", path, where), key<size_t>(j[i], "owner", path, where),
                   key<int64_t>(j[i], "params", path, where)};
    COHORT_INPUT_CHECK(t.layer < layers && t.owner < layers && t.params >= 0, "--compute ", path,
                       ": ", where, " names a layer past the last (", layers, ") or a negative count");
    ties.push_back(t);
  }
  return ties;
}

}  // namespace

Profile load_profile(const std::string& path) {
  std::ifstream in(path);
  COHORT_INPUT_CHECK(in.good(), "--compute ", path, ": cannot read the file");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw InputError("--compute " + path + ": not JSON (" + e.what() + ")");
  }
  COHORT_INPUT_CHECK(j.is_object(), "--compute ", path, ": not a JSON object");
  Profile p;
  p.source = path;
  p.model = key<std::string>(j, "model", path, "the file");
  p.batch = key<int64_t>(j, "batch", path, "the file");
  p.positions = j.value("positions", int64_t(1));
  p.threads = j.value("threads", 1);
  p.optimizer = j.value("optimizer_s", 0.0);
  p.refill = optional_figure(j, "refill_s_per_byte", path);
  p.refill_small = optional_figure(j, "refill_small_s_per_byte", path);
  p.send_refilled = optional_figure(j, "send_refilled_s_per_byte", path);
  p.read_received = optional_figure(j, "read_received_s_per_byte", path);
  p.handover = optional_figure(j, "handover_s", path);
  p.poll_wait = optional_figure(j, "poll_wait_s", path);
  p.step_spread = optional_figure(j, "step_spread", path);
  COHORT_INPUT_CHECK(p.batch >= 1, "--compute ", path, ": batch must be at least 1");
  const auto& layers = key<nlohmann::json>(j, "layers", path, "the file");
  COHORT_INPUT_CHECK(layers.is_array() && !layers.empty(), "--compute ", path,
                     ": \"layers\" must be a non-empty array");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string where = "layer " + std::to_string(i);
    const auto& e = layers[i];
    LayerCost l;
    l.name = e.value("name", where);
    l.forward = key<double>(e, "forward_s", path, where);
    l.backward = key<double>(e, "backward_s", path, where);
    l.params = key<int64_t>(e, "params", path, where);
    l.out_bytes = e.value("out_bytes", 0.0);
    l.flops = e.value("flops", 0.0);
    COHORT_INPUT_CHECK(l.forward >= 0 && l.backward >= 0 && l.params >= 0, "--compute ", path,
                       ": ", where, " has a negative figure");
    p.layers.push_back(l);
  }
  if (j.contains("ties")) p.ties = load_ties(j["ties"], p.layers.size(), path);
  return p;
}

}  // namespace cohort::sim
