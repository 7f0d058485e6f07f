// Optimizers against hand-derived closed forms and a double-precision
// reference of torch.optim's update rules; PyTorch itself when available.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace cohort {
namespace {

// torch.optim's rules in double, written independently of the implementation.
struct Reference {
  std::string kind = "sgd";  // sgd | nesterov | adam | adamw
  double lr = 0.01, momentum = 0, wd = 0, b1 = 0.9, b2 = 0.999, eps = 1e-7;
  std::vector<double> buf = {}, m = {}, v = {};
  int t = 0;

  void step(std::vector<double>& p, const std::vector<float>& grad) {
    ++t;
    buf.resize(p.size());
    m.resize(p.size());
    v.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (kind == "adamw") {
        p[i] *= 1 - lr * wd;
      } else {
        g += wd * p[i];
      }
      if (kind == "sgd" || kind == "nesterov") {
        if (momentum != 0) {
          buf[i] = t == 1 ? g : momentum * buf[i] + g;
          g = kind == "nesterov" ? g + momentum * buf[i] : buf[i];
        }
        p[i] -= lr * g;
      } else {
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        double m_hat = m[i] / (1 - std::pow(b1, t)), v_hat = v[i] / (1 - std::pow(b2, t));
        p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
      }
    }
  }
};

// Runs `opt` and `ref` side by side on random gradients; compares every element.
void expect_matches_reference(Optimizer& opt, Reference ref, int64_t n, int steps) {
  Rng rng(7);
  std::vector<float> p(n), g(n);
  std::vector<double> pd(n);
  for (int64_t i = 0; i < n; ++i) pd[i] = p[i] = rng.normal();
  for (int s = 0; s < steps; ++s) {
    for (auto& x : g) x = rng.normal();
    opt.step(p.data(), g.data(), n, float(ref.lr));
    ref.step(pd, g);
  }
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(p[i], pd[i], 1e-5 * (1 + std::abs(pd[i]))) << opt.name() << " element " << i;
  EXPECT_EQ(opt.steps(), steps);
}

TEST(Sgd, PlainStepClosedForm) {
  Sgd sgd;
  float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f};
  sgd.step(p, g, 2, 0.1f);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], -2.025f);
  EXPECT_TRUE(sgd.state().empty());
}

TEST(Sgd, MomentumConstantGradientClosedForm) {
  // buf_t = g (1 - m^t) / (1 - m), so p_t = p0 - lr g sum_k (1 - m^k) / (1 - m).
  const double m = 0.9, lr = 0.1, g0 = 0.5, p0 = 1.0;
  Sgd sgd{float(m)};
  float p = float(p0), g = float(g0);
  double expected = p0;
  for (int t = 1; t <= 5; ++t) {
    sgd.step(&p, &g, 1, float(lr));
    expected -= lr * g0 * (1 - std::pow(m, t)) / (1 - m);
    EXPECT_NEAR(p, expected, 1e-6) << "step " << t;
  }
  ASSERT_EQ(sgd.state().size(), 1u);
  EXPECT_NEAR(sgd.state()[0]->f32()[0], g0 * (1 - std::pow(m, 5)) / (1 - m), 1e-6);
  EXPECT_EQ(sgd.state_names(), std::vector<std::string>{"momentum_buffer"});
}

TEST(Sgd, NesterovAndWeightDecayMatchReference) {
  Sgd nesterov(0.9f, 0.01f, true);
  expect_matches_reference(nesterov, {.kind = "nesterov", .lr = 0.05, .momentum = 0.9, .wd = 0.01},
                           37, 6);
  Sgd decay(0.5f, 0.1f);
  expect_matches_reference(decay, {.kind = "sgd", .lr = 0.1, .momentum = 0.5, .wd = 0.1}, 37, 6);
  Sgd plain_decay(0.0f, 0.1f);
  expect_matches_reference(plain_decay, {.kind = "sgd", .lr = 0.1, .wd = 0.1}, 37, 3);
}

TEST(Sgd, WeightDecayOneStepClosedForm) {
  Sgd sgd(0.9f, 0.1f);
  float p = 2.0f, g = 0.5f;
  sgd.step(&p, &g, 1, 0.1f);  // g' = 0.5 + 0.1 * 2 = 0.7; first step buf = g'
  EXPECT_NEAR(p, 2.0 - 0.1 * 0.7, 1e-7);
}

TEST(Sgd, RejectsBadArguments) {
  EXPECT_THROW(Sgd(-0.1f), InputError);
  EXPECT_THROW(Sgd(0.0f, -1.0f), InputError);
  EXPECT_THROW(Sgd(0.0f, 0.0f, true), InputError);
}

TEST(Adam, FirstStepsClosedForm) {
  // With a constant gradient m_hat = g and v_hat = g^2 at every step, so each
  // step moves p by lr * g / (|g| + eps).
  const double lr = 0.01, eps = 1e-7;
  Adam adam;
  float p[2] = {1.0f, -3.0f}, g[2] = {0.5f, -2.0f};
  double e0 = 1.0, e1 = -3.0;
  for (int t = 1; t <= 3; ++t) {
    adam.step(p, g, 2, float(lr));
    e0 -= lr * 0.5 / (0.5 + eps);
    e1 -= lr * -2.0 / (2.0 + eps);
    EXPECT_NEAR(p[0], e0, 1e-6);
    EXPECT_NEAR(p[1], e1, 1e-6);
  }
  // Raw moments after 3 steps: m = g (1 - b1^3), v = g^2 (1 - b2^3).
  ASSERT_EQ(adam.state().size(), 2u);
  EXPECT_NEAR(adam.state()[0]->f32()[1], -2.0 * (1 - std::pow(0.9, 3)), 1e-6);
  EXPECT_NEAR(adam.state()[1]->f32()[1], 4.0 * (1 - std::pow(0.999, 3)), 1e-6);
  EXPECT_EQ(adam.state_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
}

TEST(Adam, EpsIsAddedAfterTheSquareRoot) {
  // A tiny gradient shows where eps goes: lr * g / (|g| + eps), not / sqrt(g^2 + eps).
  Adam adam(0.9f, 0.999f, 1e-3f);
  float p = 0.0f, g = 1e-3f;
  adam.step(&p, &g, 1, 1.0f);
  EXPECT_NEAR(p, -0.5, 1e-6);
}

TEST(Adam, L2WeightDecayOneStep) {
  Adam adam(0.9f, 0.999f, 1e-7f, 0.1f);
  float p = 2.0f, g = -0.5f;  // g' = -0.5 + 0.1 * 2 = -0.3: the step follows g'
  adam.step(&p, &g, 1, 0.1f);
  EXPECT_NEAR(p, 2.0 - 0.1 * -0.3 / (0.3 + 1e-7), 1e-6);
}

TEST(Adam, MatchesReferenceOverManySteps) {
  Adam adam(0.9f, 0.99f, 1e-6f, 0.05f);
  expect_matches_reference(adam, {.kind = "adam", .lr = 0.01, .wd = 0.05, .b2 = 0.99, .eps = 1e-6},
                           67, 10);
}

TEST(Adam, LargeBufferUsesEveryElement) {
  // Past the threshold the update runs in parallel blocks with a SIMD body and
  // scalar tails; an odd size exercises all of them.
  Adam adam;
  expect_matches_reference(adam, {.kind = "adam", .lr = 0.01}, 200003, 2);
}

TEST(AdamW, DecoupledDecayOneStep) {
  AdamW adamw(0.9f, 0.999f, 1e-7f, 0.1f);
  float p = 2.0f, g = -0.5f;  // p *= 1 - lr wd first; the Adam step still follows g
  adamw.step(&p, &g, 1, 0.1f);
  EXPECT_NEAR(p, 2.0 * (1 - 0.1 * 0.1) + 0.1 * 0.5 / (0.5 + 1e-7), 1e-6);
  EXPECT_EQ(adamw.name(), "adamw");
}

TEST(AdamW, MatchesReferenceOverManySteps) {
  AdamW adamw;  // default weight decay 0.01
  expect_matches_reference(adamw, {.kind = "adamw", .lr = 0.02, .wd = 0.01}, 67, 10);
}

// begin_step once and update over pieces (ZeRO's bf16 gradients step so) is
// the same step, bit for bit, for every optimizer and its state.
TEST(Optim, StepInPiecesEqualsOneStep) {
  const int64_t n = 70001;
  std::vector<float> grads(static_cast<size_t>(n));
  Rng rng(7);
  for (float& g : grads) g = rng.normal();
  for (const char* name : {"sgd", "adam", "adamw"}) {
    auto whole = make_optimizer(name, 0.01f, 0.9f), pieces = make_optimizer(name, 0.01f, 0.9f);
    std::vector<float> a(static_cast<size_t>(n), 0.5f), b = a;
    for (int step = 0; step < 3; ++step) {
      whole->step(a.data(), grads.data(), n, 0.01f);
      pieces->begin_step(n);
      for (int64_t off = 0; off < n; off += 30000) {
        const int64_t k = std::min<int64_t>(30000, n - off);
        pieces->update(b.data() + off, grads.data() + off, off, k, 0.01f);
      }
    }
    EXPECT_EQ(a, b) << name;
    EXPECT_EQ(whole->steps(), pieces->steps()) << name;
    const auto sw = whole->state(), sp = pieces->state();
    ASSERT_EQ(sw.size(), sp.size()) << name;
    for (size_t i = 0; i < sw.size(); ++i)
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(sw[i]->f32()[j], sp[i]->f32()[j]) << name << " state " << i << " at " << j;
  }
}

TEST(Adam, ConvergesOnAQuadratic) {
  // f(x) = sum_i a_i (x_i - c_i)^2 / 2 with curvatures spanning 100x.
  const int n = 10;
  std::vector<float> x(n, 0.0f), grad(n), a(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.1f + 1.1f * i;
    c[i] = float(i) - 4.5f;
  }
  Adam adam;
  CosineSchedule schedule(0.1f, 2000);
  for (int64_t step = 0; step < 2000; ++step) {
    for (int i = 0; i < n; ++i) grad[i] = a[i] * (x[i] - c[i]);
    adam.step(x.data(), grad.data(), n, schedule.lr(step));
  }
  for (int i = 0; i < n; ++i) EXPECT_NEAR(x[i], c[i], 1e-3) << i;
}

TEST(Optim, StateIsLazyAndSizeIsFixed) {
  Adam adam;
  EXPECT_TRUE(adam.state().empty());
  std::vector<float> p(4, 0.0f), g(4, 1.0f);
  adam.step(p.data(), g.data(), 4, 0.1f);
  ASSERT_EQ(adam.state().size(), 2u);
  EXPECT_EQ(adam.state()[0]->numel(), 4);
  EXPECT_THROW(adam.step(p.data(), g.data(), 3, 0.1f), Error);
}

TEST(Optim, RestoredStateContinuesExactly) {
  // What a checkpoint restore does: init_state, copy state(), set_steps.
  std::vector<float> p(5), g(5);
  for (int i = 0; i < 5; ++i) p[i] = g[i] = 0.3f * float(i) - 0.5f;
  for (const char* name : {"sgd", "adam", "adamw"}) {
    auto a = make_optimizer(name, 0.01f, 0.9f);
    std::vector<float> pa = p;
    for (int s = 0; s < 3; ++s) a->step(pa.data(), g.data(), 5, 0.1f);
    auto b = make_optimizer(name, 0.01f, 0.9f);
    b->init_state(5);
    for (size_t k = 0; k < a->state().size(); ++k) b->state()[k]->copy_from(*a->state()[k]);
    b->set_steps(a->steps());
    std::vector<float> pb = pa;
    a->step(pa.data(), g.data(), 5, 0.1f);
    b->step(pb.data(), g.data(), 5, 0.1f);
    EXPECT_EQ(pa, pb) << name;
  }
}

TEST(Optim, FactoryNamesAndErrors) {
  EXPECT_EQ(make_optimizer("sgd", 0, 0.9f)->name(), "sgd");
  EXPECT_EQ(make_optimizer("adam", 0, 0)->name(), "adam");
  EXPECT_EQ(make_optimizer("adamw", 0.01f, 0)->name(), "adamw");
  try {
    make_optimizer("rmsprop", 0, 0);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("--optimizer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rmsprop"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sgd, adam, adamw"), std::string::npos) << msg;
  }
  EXPECT_THROW(make_optimizer("adam", -1.0f, 0), InputError);
  EXPECT_THROW(Adam(1.0f), InputError);
}

// Cross-check against torch.optim itself when /usr/bin/python3 has torch.
TEST(Optim, MatchesTorchOptim) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("cohort_optim_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const int n = 33, steps = 4;
  Rng rng(3);
  std::vector<float> p0(n), grads(n * steps);
  for (auto& x : p0) x = rng.normal();
  for (auto& x : grads) x = rng.normal();
  {
    std::ofstream f(dir / "in.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(p0.data()), n * 4);
    f.write(reinterpret_cast<const char*>(grads.data()), n * steps * 4);
  }
  std::ofstream(dir / "ref.py") << R"(import array, sys
try:
    import torch
except ImportError:
    sys.exit(77)
d, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = array.array('f')
a.frombytes(open(d + '/in.bin', 'rb').read())
raw = torch.tensor(a.tolist(), dtype=torch.float32)
p0, grads = raw[:n], raw[n:].view(steps, n)
def run(make):
    p = torch.nn.Parameter(p0.clone())
    opt = make([p])
    for s in range(steps):
        p.grad = grads[s].clone()
        opt.step()
    return p.detach()
outs = [
    run(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)),
    run(lambda ps: torch.optim.Adam(ps, lr=0.01, eps=1e-7, weight_decay=0.05)),
    run(lambda ps: torch.optim.AdamW(ps, lr=0.01, eps=1e-7, weight_decay=0.1)),
]
open(d + '/out.bin', 'wb').write(array.array('f', torch.cat(outs).tolist()).tobytes())
)";
  std::string cmd = "/usr/bin/python3 " + (dir / "ref.py").string() + " " + dir.string() + " " +
                    std::to_string(n) + " " + std::to_string(steps);
  int status = std::system(cmd.c_str());
  if (WIFEXITED(status) && (WEXITSTATUS(status) == 77 || WEXITSTATUS(status) == 127)) {
    fs::remove_all(dir);
    FAIL() << "/usr/bin/python3 is missing or cannot import torch (scripts/setup.sh installs python3-torch)";
  }
  ASSERT_EQ(status, 0) << cmd;
  std::vector<float> torch_out(3 * n);
  std::ifstream(dir / "out.bin", std::ios::binary)
      .read(reinterpret_cast<char*>(torch_out.data()), 3 * n * 4);
  Sgd sgd(0.9f, 0.01f, true);
  Adam adam(0.9f, 0.999f, 1e-7f, 0.05f);
  AdamW adamw(0.9f, 0.999f, 1e-7f, 0.1f);
  Optimizer* opts[3] = {&sgd, &adam, &adamw};
  const float lrs[3] = {0.1f, 0.01f, 0.01f};
  for (int k = 0; k < 3; ++k) {
    std::vector<float> p = p0;
    for (int s = 0; s < steps; ++s) opts[k]->step(p.data(), grads.data() + s * n, n, lrs[k]);
    for (int i = 0; i < n; ++i)
      EXPECT_NEAR(p[i], torch_out[k * n + i], 2e-6 * (1 + std::abs(p[i])))
          << opts[k]->name() << " element " << i;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cohort
