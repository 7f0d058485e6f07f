// Hugging Face GPT-2 files load into cohort's GPT-2: the peer writes a
// model's weights in HF's model.safetensors layout (Conv1D projections
// {in, out}, attention-mask buffers, no cohort metadata), and `--load` of it
// gives back every weight bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "bench/peer.h"
#include "nn/models/zoo.h"
#include "train/checkpoint.h"
#include "train/hf_gpt2.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

TEST(HfGpt2, LoadsHuggingFaceLayoutBitForBit) {
  ASSERT_TRUE(peer_available()) << "python3-torch not importable by " << peer_python();
  const fs::path dir = fs::temp_directory_path() / "cohort_hf_gpt2";
  fs::create_directories(dir);
  auto spec = nn::find_model("gpt2-tiny", 16, 0);
  auto original = nn::build_model(spec, 4);
  const std::string ours = (dir / "w.safetensors").string(), hf = (dir / "hf.safetensors").string();
  save_checkpoint(ours, "gpt2-tiny", original->params(), nullptr, {});
  run_peer({"hf-export", "--model", "gpt2-tiny", "--seq", "16", "--weights", ours, "--out", hf});
  const SafetensorsFile file = load_safetensors(hf);
  ASSERT_TRUE(is_hf_gpt2(file));
  ASSERT_NE(file.find("h.0.attn.bias"), nullptr) << "the mask buffers HF's files carry";
  EXPECT_EQ(file.find("h.0.mlp.c_fc.weight")->shape(), (Shape{64, 256}));  // {in, out}

  auto loaded = nn::build_model(spec, 99);  // other weights, overwritten by the load
  load_checkpoint(hf, "gpt2-tiny", loaded->params(), &loaded->buffers());
  const Tensor &a = original->params().params(), &b = loaded->params().params();
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
  // Our own checkpoints are not mistaken for HF's.
  EXPECT_FALSE(is_hf_gpt2(load_safetensors(ours)));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cohort
