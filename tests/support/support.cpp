#include "support/support.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/state_shards.h"

namespace cohort::testing_support {

int run(const std::string& cmd, std::string* out) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (f && std::fgets(buf, sizeof buf, f))
    if (out) *out += buf;
  const int status = f ? pclose(f) : -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  r.code = run(cmd, &r.out);
  return r;
}

void expect_one_line_error(const std::string& cmd, const std::string& culprit) {
  CommandResult r = run_command(cmd);
  EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out;
  EXPECT_NE(r.out.find(culprit), std::string::npos) << cmd << "\n" << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << cmd << "\n" << r.out;
}

std::string equality_train_command() {
  return std::string(COHORT_BIN) +
         " train --data synthetic --epochs 1 --optimizer sgd --lr 0.01 --momentum 0.9"
         " --log jsonl --limit 256 --threads 1";
}

double rel_l2(const float* a, const float* b, int64_t n) {
  double d = 0, m = 1e-30;
  for (int64_t i = 0; i < n; ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    m += double(b[i]) * b[i];
  }
  return std::sqrt(d / m);
}

std::string checkpoint_differences(const std::string& a, const std::string& b) {
  const SafetensorsFile fa = load_safetensors(a), fb = load_safetensors(b);
  std::string diff;
  if (fa.tensors.size() != fb.tensors.size()) diff += "tensor count; ";
  for (const NamedTensor& t : fa.tensors) {
    const Tensor* o = fb.find(t.name);
    if (!o || o->shape() != t.tensor.shape() ||
        std::memcmp(o->data(), t.tensor.data(), t.tensor.nbytes()) != 0)
      diff += t.name + "; ";
  }
  for (const char* key : {"epoch", "updates", "optimizer", "optimizer.steps", "loss_scale"})
    if (fa.metadata.count(key) != fb.metadata.count(key) ||
        (fa.metadata.count(key) && fa.metadata.at(key) != fb.metadata.at(key)))
      diff += std::string("metadata ") + key + "; ";
  return diff;
}

double checkpoint_rel_diff(const std::string& a, const std::string& b) {
  auto fa = load_safetensors(a), fb = load_safetensors(b);
  append_listed_state(a, fa);
  append_listed_state(b, fb);
  double diff = 0, ref = 0;
  for (auto& t : fb.tensors) {
    const Tensor* o = fa.find(t.name);
    if (!o) return 1e30;
    for (int64_t i = 0; i < t.tensor.numel(); ++i) {
      diff = std::max(diff, double(std::fabs(o->f32()[i] - t.tensor.f32()[i])));
      ref = std::max(ref, double(std::fabs(t.tensor.f32()[i])));
    }
  }
  return ref > 0 ? diff / ref : diff;
}

void expect_pytorch_script(const std::string& dir, const std::string& file,
                           const std::string& body, const std::string& args) {
  const std::string script = dir + "/check_with_torch.py";
  std::ofstream(script) << R"(import json, struct, sys
try:
    import torch
except ImportError:
    sys.exit(77)
raw = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', raw[:8])
header = json.loads(raw[8:8 + n])
meta = header.pop('__metadata__')
t = {}
for name, e in header.items():
    b, end = e['data_offsets']
    t[name] = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + end]), dtype=torch.float32).reshape(e['shape'])
)" << body;
  const std::string cmd = "/usr/bin/python3 " + script + " " + file + " " + args;
  const int status = std::system(cmd.c_str());
  if (WIFEXITED(status) && (WEXITSTATUS(status) == 77 || WEXITSTATUS(status) == 127))
    FAIL() << "/usr/bin/python3 is missing or cannot import torch (scripts/setup.sh installs it)";
  EXPECT_EQ(status, 0) << cmd;
}

nlohmann::json last_json(const std::string& out) {
  nlohmann::json last;
  std::stringstream ss(out);
  for (std::string line; std::getline(ss, line);)
    if (!line.empty() && line[0] == '{') last = nlohmann::json::parse(line, nullptr, false);
  return last;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace cohort::testing_support
