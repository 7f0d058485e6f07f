// safetensors checkpoints: round trips, atomic saves, hostile files, and
// interoperability with Python/PyTorch when available.
#include "train/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/rng.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("cohort_ckpt_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// A small model: two parameters and one buffer arena, filled from `seed`.
struct Model {
  Arena params, buffers;
  Tensor w, dw, b, db, mean, unused;
  Model(int64_t out = 3, int64_t in = 4, uint64_t seed = 1) {
    params.add("fc.weight", {out, in}, &w, &dw);
    params.add("fc.bias", {out}, &b, &db);
    buffers.add("bn.running_mean", {in}, &mean, &unused);
    params.allocate();
    buffers.allocate();
    Rng rng(seed);
    for (const Arena* a : {&params, &buffers})
      for (int64_t i = 0; i < a->size(); ++i) a->params().f32()[i] = rng.normal();
  }
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// A file of: `header_len` (u64 LE), `header`, `data`.
void write_raw(const std::string& path, uint64_t header_len, const std::string& header,
               const std::string& data = "") {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&header_len), 8);
  f << header << data;
}

void write_raw(const std::string& path, const std::string& header, const std::string& data = "") {
  write_raw(path, header.size(), header, data);
}

bool has_temp_files(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

// Expects load_safetensors(path) to throw a one-line InputError naming the
// path and containing `needle`.
void expect_bad_file(const std::string& path, const std::string& needle) {
  try {
    load_safetensors(path);
    ADD_FAILURE() << "no InputError for " << needle;
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST_F(Checkpoint, RoundTripRestoresEveryValue) {
  Model saved(3, 4, 1), restored(3, 4, 2);
  save_checkpoint(path("m.safetensors"), "tiny", saved.params, &saved.buffers,
                  {{"epoch", "3"}, {"step", "120"}});
  load_checkpoint(path("m.safetensors"), "tiny", restored.params, &restored.buffers);
  for (int64_t i = 0; i < saved.params.size(); ++i)
    EXPECT_EQ(restored.params.params().f32()[i], saved.params.params().f32()[i]);
  EXPECT_EQ(restored.mean.f32()[3], saved.mean.f32()[3]);

  SafetensorsFile file = load_safetensors(path("m.safetensors"));
  EXPECT_EQ(file.metadata.at("model"), "tiny");
  EXPECT_EQ(file.metadata.at("epoch"), "3");
  ASSERT_EQ(file.tensors.size(), 3u);
  EXPECT_EQ(file.tensors[0].name, "fc.weight");  // file order
  EXPECT_EQ(file.tensors[2].name, "bn.running_mean");
  ASSERT_NE(file.find("fc.bias"), nullptr);
  EXPECT_EQ(file.find("fc.bias")->shape(), Shape{3});
  EXPECT_EQ(file.find("nope"), nullptr);
  EXPECT_FALSE(has_temp_files(dir_));
}

TEST_F(Checkpoint, SafetensorsKeepsDtypesScalarsAndEmptyTensors) {
  Tensor f = Tensor::empty({2, 2});
  for (int i = 0; i < 4; ++i) f.f32()[i] = 0.25f * float(i) - 1.0f;
  Tensor h = Tensor::empty({3}, DType::kBF16);
  h.copy_from(f.reshape({4}).slice(0, 3));
  Tensor scalar = Tensor::empty({});
  scalar.f32()[0] = 42.0f;
  Tensor empty = Tensor::empty({0, 5});
  save_safetensors(path("t.safetensors"),
                   {{"f", f}, {"h", h}, {"scalar", scalar}, {"empty", empty}}, {});
  SafetensorsFile file = load_safetensors(path("t.safetensors"));
  EXPECT_TRUE(file.metadata.empty());
  ASSERT_EQ(file.tensors.size(), 4u);
  EXPECT_EQ(file.find("f")->f32()[3], -0.25f);
  EXPECT_EQ(file.find("h")->dtype(), DType::kBF16);
  EXPECT_EQ(from_bf16(file.find("h")->bf16()[1]), -0.75f);
  EXPECT_EQ(file.find("scalar")->shape(), Shape{});
  EXPECT_EQ(file.find("scalar")->f32()[0], 42.0f);
  EXPECT_EQ(file.find("empty")->shape(), (Shape{0, 5}));
}

TEST_F(Checkpoint, HeaderIsSafetensorsJsonWithContiguousOffsets) {
  Model m;
  save_checkpoint(path("m.safetensors"), "tiny", m.params, &m.buffers, {});
  std::string bytes = read_all(path("m.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_LE(8 + n, bytes.size());
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["__metadata__"]["model"], "tiny");
  const std::string data = bytes.substr(8 + n);
  uint64_t expected_begin = 0;
  for (const char* name : {"fc.weight", "fc.bias", "bn.running_mean"}) {
    const auto& e = header.at(name);
    EXPECT_EQ(e["dtype"], "F32");
    uint64_t begin = e["data_offsets"][0], end = e["data_offsets"][1];
    EXPECT_EQ(begin, expected_begin) << name;
    expected_begin = end;
  }
  EXPECT_EQ(header["fc.weight"]["shape"], nlohmann::json::array({3, 4}));
  EXPECT_EQ(expected_begin, data.size());
  EXPECT_EQ(std::memcmp(data.data(), m.w.data(), m.w.nbytes()), 0);
  EXPECT_EQ(std::memcmp(data.data() + 48, m.b.data(), m.b.nbytes()), 0);
}

TEST_F(Checkpoint, FailedSaveLeavesNoTempFileAndOldFileIntact) {
  Model m;
  // Into a directory that does not exist.
  EXPECT_THROW(save_checkpoint(path("no/such/dir/m.safetensors"), "tiny", m.params, nullptr, {}),
               Error);
  EXPECT_FALSE(has_temp_files(dir_));
  // Onto a directory: the temp file is written, the rename fails, the temp goes.
  fs::create_directory(path("taken"));
  try {
    save_checkpoint(path("taken"), "tiny", m.params, nullptr, {});
    ADD_FAILURE() << "saving onto a directory succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path("taken")), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(path("taken")));
  EXPECT_FALSE(has_temp_files(dir_));
}

TEST_F(Checkpoint, WriteErrorMidFileKeepsOldCheckpoint) {
  // A file-size limit makes write() fail part-way through, as a full disk would.
  std::ofstream(path("m.safetensors")) << "previous checkpoint";
  Tensor big = Tensor::zeros({1 << 18});  // 1 MiB
  rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit small = old_limit;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    save_safetensors(path("m.safetensors"), {{"big", big}}, {});
  } catch (const Error&) {
    threw = true;
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  EXPECT_EQ(read_all(path("m.safetensors")), "previous checkpoint");
  EXPECT_FALSE(has_temp_files(dir_));
}

TEST_F(Checkpoint, BadFilesAreInputErrors) {
  expect_bad_file(path("missing.safetensors"), "cannot open");
  std::ofstream(path("short")) << "abc";
  expect_bad_file(path("short"), "too short");
  // A header length near 2^64 must be rejected before anything is allocated.
  write_raw(path("huge"), ~uint64_t(0) - 3, "{}");
  expect_bad_file(path("huge"), "header");
  write_raw(path("long"), 100, "{}");
  expect_bad_file(path("long"), "header");
  write_raw(path("json"), "{\"a\": [1,");
  expect_bad_file(path("json"), "not valid JSON");
  write_raw(path("array"), "[1, 2]");
  expect_bad_file(path("array"), "not a JSON object");
  write_raw(path("range"), R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234");
  expect_bad_file(path("range"), "outside");
  write_raw(path("size"), R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
            "12345678");
  expect_bad_file(path("size"), "needs 12");
  write_raw(path("dtype"), R"({"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", "1234");
  expect_bad_file(path("dtype"), "unsupported dtype 'I8'");
  write_raw(path("shape"), R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "1234");
  expect_bad_file(path("shape"), "shape");
  write_raw(path("overflow"),
            R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
            "1234");
  expect_bad_file(path("overflow"), "too large");
  write_raw(path("meta"), R"({"__metadata__":{"model":7}})");
  expect_bad_file(path("meta"), "metadata");
  write_raw(path("overlap"),
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            "12345678");
  expect_bad_file(path("overlap"), "overlap");
  expect_bad_file(dir_.string(), "not a regular file");
}

TEST_F(Checkpoint, WrongModelOrShapeIsInputErrorAndChangesNothing) {
  Model saved(3, 4, 1);
  save_checkpoint(path("m.safetensors"), "lenet", saved.params, &saved.buffers, {});
  Model other(3, 4, 2);
  const float before = other.w.f32()[0];
  try {
    load_checkpoint(path("m.safetensors"), "mnist-small", other.params, &other.buffers);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint " + path("m.safetensors") + " holds model 'lenet', not 'mnist-small'");
  }
  // fc.weight matches and comes first, fc.bias has a different shape: fc.weight
  // must not have been overwritten when the error is found.
  Arena params;
  Tensor w, dw, b, db;
  params.add("fc.weight", {3, 4}, &w, &dw);
  params.add("fc.bias", {5}, &b, &db);
  params.allocate();
  try {
    load_checkpoint(path("m.safetensors"), "lenet", params, nullptr);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint " + path("m.safetensors") +
                                         ": tensor 'fc.bias' has shape [3], model expects [5]");
  }
  EXPECT_EQ(w.f32()[0], 0.0f);
  // A buffer arena the file lacks.
  save_checkpoint(path("nobuf.safetensors"), "lenet", saved.params, nullptr, {});
  try {
    load_checkpoint(path("nobuf.safetensors"), "lenet", other.params, &other.buffers);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'bn.running_mean' is missing"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(other.w.f32()[0], before);
  // A safetensors file without cohort's metadata.
  save_safetensors(path("plain.safetensors"), {{"fc.weight", saved.w}}, {});
  EXPECT_THROW(load_checkpoint(path("plain.safetensors"), "lenet", other.params, nullptr),
               InputError);
}

TEST_F(Checkpoint, ReadableFromPythonAndBack) {
  Model m;
  save_checkpoint(path("m.safetensors"), "tiny", m.params, &m.buffers, {{"step", "9"}});
  // Python parses the file by the spec (json + struct, no safetensors package),
  // checks every value against what we wrote, then writes its own file with
  // an unpadded header and a BF16 tensor for us to read.
  std::ofstream expected(path("expected.txt"));
  expected.precision(9);
  for (const Arena* a : {&m.params, &m.buffers})
    for (size_t i = 0; i < a->infos().size(); ++i) {
      Tensor t = a->param(i);
      expected << a->infos()[i].name;
      for (int64_t k = 0; k < t.numel(); ++k) expected << " " << t.f32()[k];
      expected << "\n";
    }
  expected.close();
  std::ofstream(path("check.py")) << R"(import json, struct, sys
try:
    import torch
except ImportError:
    sys.exit(77)
d = sys.argv[1]
raw = open(d + '/m.safetensors', 'rb').read()
(n,) = struct.unpack('<Q', raw[:8])
assert n % 8 == 0, n
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
assert header['__metadata__'] == {'model': 'tiny', 'step': '9'}, header['__metadata__']
for line in open(d + '/expected.txt'):
    name, *values = line.split()
    e = header[name]
    assert e['dtype'] == 'F32'
    b, end = e['data_offsets']
    t = torch.frombuffer(bytearray(data[b:end]), dtype=torch.float32).reshape(e['shape'])
    want = torch.tensor([float(v) for v in values], dtype=torch.float32).reshape(e['shape'])
    assert torch.equal(t, want), (name, t, want)
w = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4
h = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
wb = bytes(bytearray(w.contiguous().view(torch.uint8).flatten().tolist()))
hb = bytes(bytearray(h.view(torch.uint8).flatten().tolist()))
hdr = json.dumps({'h': {'dtype': 'BF16', 'shape': [2], 'data_offsets': [len(wb), len(wb) + len(hb)]},
                  'w': {'dtype': 'F32', 'shape': [2, 3], 'data_offsets': [0, len(wb)]}}).encode()
open(d + '/py.safetensors', 'wb').write(struct.pack('<Q', len(hdr)) + hdr + wb + hb)
)";
  std::string cmd = "/usr/bin/python3 " + path("check.py") + " " + dir_.string();
  int status = std::system(cmd.c_str());
  if (WIFEXITED(status) && (WEXITSTATUS(status) == 77 || WEXITSTATUS(status) == 127))
    FAIL() << "/usr/bin/python3 is missing or cannot import torch (scripts/setup.sh installs python3-torch)";
  ASSERT_EQ(status, 0) << cmd;
  SafetensorsFile file = load_safetensors(path("py.safetensors"));
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors[0].name, "w");  // file order, not header order
  EXPECT_EQ(file.find("w")->shape(), (Shape{2, 3}));
  EXPECT_EQ(file.find("w")->f32()[5], 1.25f);
  EXPECT_EQ(file.find("h")->dtype(), DType::kBF16);
  EXPECT_EQ(from_bf16(file.find("h")->bf16()[1]), -2.0f);
}

}  // namespace
}  // namespace cohort
