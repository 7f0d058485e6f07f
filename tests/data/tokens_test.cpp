// Token streams (data/tokens.h): text as bytes and llm.c shards written here
// in llm.c's format, their windows and split in closed form, every bad file
// as a one-line InputError naming it, and the default corpus setup installs.
#include "data/tokens.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "data/data_test_util.h"

namespace cohort {
namespace {

using testing::expect_input_error;
using testing::write_raw;

constexpr int kGpt2Vocab = 50257;

void put_le32(testing::Bytes& b, int32_t v) {
  for (int s = 0; s < 32; s += 8) b.push_back(static_cast<unsigned char>(uint32_t(v) >> s));
}

// A shard as llm.c's write_datafile writes it; `count` is what the header
// claims (default: the number of tokens), `extra` bytes follow the tokens.
testing::Bytes shard(const std::vector<int>& tokens, int32_t magic = kShardMagic,
                     int32_t version = kShardVersion, std::optional<int32_t> count = {},
                     int extra = 0) {
  testing::Bytes b;
  put_le32(b, magic);
  put_le32(b, version);
  put_le32(b, count.value_or(int32_t(tokens.size())));
  b.resize(size_t(kShardHeaderBytes), 0);
  for (int t : tokens) {
    b.push_back(static_cast<unsigned char>(t & 0xff));
    b.push_back(static_cast<unsigned char>(t >> 8));
  }
  b.insert(b.end(), size_t(extra), 0x5a);
  return b;
}

// Token i of the test streams: spread over uint16 so byte order matters.
int token_at(int64_t i) { return int((i * 997 + 3) % 50000); }

std::vector<int> token_range(int64_t begin, int64_t end) {
  std::vector<int> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(token_at(i));
  return v;
}

// Window i's inputs are stream[i*T + t], its targets stream[i*T + t + 1].
template <typename At>
void expect_windows(const Dataset& d, int64_t first, int64_t n, int64_t T, At at) {
  ASSERT_EQ(d.images.shape(), (Shape{n, T}));
  ASSERT_EQ(d.images.dtype(), DType::kI32);
  ASSERT_EQ(int64_t(d.labels.size()), n * T);
  EXPECT_EQ(d.positions(), T);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t s = (first + i) * T + t;
      ASSERT_EQ(d.images.i32()[i * T + t], at(s)) << "window " << i << " position " << t;
      ASSERT_EQ(d.labels[size_t(i * T + t)], at(s + 1)) << "window " << i << " position " << t;
    }
}

TEST(TokenText, WindowsAndSplitInClosedForm) {
  testing::TempDir dir;
  // 20 windows of T=4 need 81 bytes: 18 train, 2 test (the last 10%).
  testing::Bytes text;
  for (int i = 0; i < 83; ++i) text.push_back(static_cast<unsigned char>((i * 41 + 7) % 256));
  const std::string path = dir.file("corpus.txt");
  write_raw(path, text);
  const auto at = [&](int64_t s) { return int32_t(text[size_t(s)]); };
  DataSplit s = load_token_dataset("text", path, 0, 4, 256);
  expect_windows(s.train, 0, 18, 4, at);
  expect_windows(s.test, 18, 2, 4, at);
  EXPECT_EQ(s.train.num_classes, 256);
  EXPECT_EQ(s.train.name, "text");
  // --limit keeps the first training windows; the test set stays whole.
  DataSplit l = load_token_dataset("text", path, 5, 4, 256);
  expect_windows(l.train, 0, 5, 4, at);
  expect_windows(l.test, 18, 2, 4, at);
  // A larger vocabulary (GPT-2's) takes bytes too; a smaller one cannot.
  EXPECT_EQ(load_token_dataset("text", path, 0, 4, kGpt2Vocab).train.num_classes, 256);
  expect_input_error([&] { load_token_dataset("text", path, 0, 4, 100); }, "256");
}

TEST(TokenText, TooShortFilesNameThemselves) {
  testing::TempDir dir;
  const std::string empty = dir.file("empty.txt"), one = dir.file("one-window.txt");
  write_raw(empty, {});
  write_raw(one, testing::Bytes(5, 'a'));  // T+1 = 5 bytes: a window, but none left for testing
  expect_input_error([&] { load_token_dataset("text", empty, 0, 4, 256); }, empty);
  expect_input_error([&] { load_token_dataset("text", dir.file("none.txt"), 0, 4, 256); },
                     dir.file("none.txt"));
  expect_input_error([&] { load_token_dataset("text", dir.file("short"), 0, 4, 256); }, "short");
  write_raw(dir.file("short"), testing::Bytes(4, 'a'));  // fewer than T+1
  expect_input_error([&] { load_token_dataset("text", dir.file("short"), 0, 4, 256); },
                     dir.file("short"));
  expect_input_error([&] { load_token_dataset("text", one, 0, 4, 256); }, one);
}

TEST(TokenShard, ReadsLlmcShardsInSortedGlobOrder) {
  testing::TempDir dir;
  // Written out of order: the glob reads a-*.bin before b-*.bin.
  write_raw(dir.file("b-train.bin"), shard(token_range(30, 61)));
  write_raw(dir.file("a-train.bin"), shard(token_range(0, 30)));
  write_raw(dir.file("notes.txt"), testing::Bytes(3, 'x'));  // not matched
  DataSplit s = load_token_dataset("tokens", dir.str() + "/*.bin", 0, 5, kGpt2Vocab);
  // 61 tokens: 12 windows of T=5, 11 train and 1 test.
  expect_windows(s.train, 0, 11, 5, token_at);
  expect_windows(s.test, 11, 1, 5, token_at);
  EXPECT_EQ(s.train.num_classes, kGpt2Vocab);
  EXPECT_EQ(s.test.name, "tokens");
  // One shard by its plain path.
  DataSplit one = load_token_dataset("tokens", dir.file("a-train.bin"), 2, 5, kGpt2Vocab);
  expect_windows(one.train, 0, 2, 5, token_at);
  expect_windows(one.test, 4, 1, 5, token_at);  // 29 / 5 = 5 windows: 4 + 1
}

TEST(TokenShard, EveryBadFileIsAnInputErrorNamingIt) {
  testing::TempDir dir;
  const std::vector<int> ok = token_range(0, 20);
  struct Case {
    const char* name;
    testing::Bytes bytes;
  };
  const Case cases[] = {
      {"empty.bin", {}},
      {"short-header.bin", testing::Bytes(100, 0)},
      {"no-tokens.bin", shard({})},
      {"too-few.bin", shard(token_range(0, 4))},  // T+1 = 5 needed
      {"magic.bin", shard(ok, 20240521)},
      {"version.bin", shard(ok, kShardMagic, 2)},
      {"negative.bin", shard(ok, kShardMagic, kShardVersion, -3)},
      {"truncated.bin", shard(ok, kShardMagic, kShardVersion, 21)},
      {"trailing.bin", shard(ok, kShardMagic, kShardVersion, {}, 1)},
      {"trailing-token.bin", shard(ok, kShardMagic, kShardVersion, 19)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file(c.name);
    write_raw(path, c.bytes);
    expect_input_error([&] { load_token_dataset("tokens", path, 0, 4, kGpt2Vocab); }, path);
    // In a glob with good shards the bad one is still found and named.
    write_raw(dir.file("0-good.bin"), shard(ok));
    expect_input_error(
        [&] { load_token_dataset("tokens", dir.str() + "/*.bin", 0, 4, kGpt2Vocab); }, path);
    std::filesystem::remove(path);
  }
  expect_input_error([&] { load_token_dataset("tokens", dir.file("gone.bin"), 0, 4, 9); },
                     dir.file("gone.bin"));
  expect_input_error([&] { load_token_dataset("tokens", dir.str() + "/*.none", 0, 4, 9); },
                     dir.str() + "/*.none");
  expect_input_error([&] { load_token_dataset("tokens", dir.str(), 0, 4, 9); }, dir.str());
  expect_input_error([&] { load_token_dataset("tokens", "", 0, 4, 9); }, "--data-path");
}

TEST(TokenShard, IdOutsideTheVocabularyNamesFilePositionAndId) {
  testing::TempDir dir;
  std::vector<int> toks = token_range(0, 40);
  toks[33] = 50300;  // in the test windows, which are always read
  const std::string path = dir.file("big-id.bin");
  write_raw(path, shard(toks));
  try {
    load_token_dataset("tokens", path, 0, 4, kGpt2Vocab);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const std::string& part : {path, std::string("token 33"), std::string("50300")})
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
  // A vocabulary of 50301 holds it.
  EXPECT_EQ(load_token_dataset("tokens", path, 0, 4, 50301).test.labels.size(), 4u);
}

TEST(TokenData, ImageLoaderRefusesTokenNames) {
  expect_input_error([] { load_dataset("text", "/tmp"); }, "--data text");
  EXPECT_TRUE(is_token_dataset("tokens"));
  EXPECT_FALSE(is_token_dataset("synthetic"));
}

TEST(TokenData, DefaultCorpusIsInstalledAndOverOneMegabyte) {
  const std::vector<std::string> files = default_text_files();
  int64_t bytes = 0;
  for (const auto& f : files) {
    EXPECT_NE(std::filesystem::path(f).extension(), ".dat") << f;
    bytes += int64_t(std::filesystem::file_size(f));
  }
  EXPECT_GT(bytes, int64_t(1) << 20);
  EXPECT_TRUE(std::is_sorted(files.begin(), files.end()));
  DataSplit s = load_token_dataset("text", "", 10, 64, 256);
  EXPECT_EQ(s.train.images.shape(), (Shape{10, 64}));
  // The test set: the last 10% of the corpus's windows.
  EXPECT_EQ(s.test.size(), ((bytes - 1) / 64) / 10);
  expect_input_error([] { default_text_files("/nonexistent/fortunes"); }, "/nonexistent/fortunes");
}

}  // namespace
}  // namespace cohort
