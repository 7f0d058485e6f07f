// Token shards, text as bytes, and their windows. Every file is validated
// (header against size) before anything is allocated, and only the tokens a
// split keeps are read.
#include "data/tokens.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

constexpr int kTextVocab = 256;
constexpr int64_t kReadChunk = int64_t(1) << 20;  // tokens per read() call

// Size of a regular, non-empty file; InputError naming it otherwise.
int64_t file_bytes(const std::string& path) {
  std::error_code ec;
  COHORT_INPUT_CHECK(fs::exists(path, ec), path, ": file not found");
  COHORT_INPUT_CHECK(fs::is_regular_file(path, ec), path, ": not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  COHORT_INPUT_CHECK(!ec, path, ": cannot stat (", ec.message(), ")");
  COHORT_INPUT_CHECK(size > 0, path, ": file is empty");
  return int64_t(size);
}

int32_t le_i32(const unsigned char* p) {
  return int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                 uint32_t(p[3]) << 24);
}

// "path" for one file, "path and k more" for several: for messages.
std::string files_str(const std::vector<TokenFile>& files) {
  if (files.empty()) return "(no files)";
  std::string s = files.front().path;
  if (files.size() > 1) s += " and " + std::to_string(files.size() - 1) + " more";
  return s;
}

// Every file must hold one whole window: T inputs and the next token.
void check_one_window(const TokenFile& f, int64_t context) {
  COHORT_INPUT_CHECK(f.count >= context + 1, f.path, ": ", f.count, " tokens, fewer than the ",
                     context + 1, " that one window of context T=", context, " needs");
}

// Windows [first, last) of the stream as inputs {N, T} i32 and N*T targets.
Dataset windows(const TokenStream& stream, int64_t first, int64_t last, int64_t context, int vocab,
                const std::string& name) {
  const int64_t n = last - first;
  const std::vector<int32_t> tok = stream.read(first * context, last * context + 1, vocab);
  Dataset d;
  d.images = Tensor::empty({n, context}, DType::kI32);
  std::copy_n(tok.begin(), n * context, d.images.i32());
  d.labels.assign(tok.begin() + 1, tok.end());
  d.num_classes = vocab;
  d.name = name;
  return d;
}

}  // namespace

TokenFile open_token_shard(const std::string& path) {
  const int64_t size = file_bytes(path);
  COHORT_INPUT_CHECK(size >= kShardHeaderBytes, path, ": ", size, " bytes, shorter than the ",
                     kShardHeaderBytes, "-byte header of an llm.c token shard");
  unsigned char header[kShardHeaderBytes];
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(header), kShardHeaderBytes);
  COHORT_INPUT_CHECK(f.gcount() == kShardHeaderBytes, path, ": cannot read the header");
  const int32_t magic = le_i32(header), version = le_i32(header + 4), count = le_i32(header + 8);
  COHORT_INPUT_CHECK(magic == kShardMagic, path, ": magic ", magic, " is not llm.c's token shard ",
                     kShardMagic);
  COHORT_INPUT_CHECK(version == kShardVersion, path, ": shard version ", version,
                     " is not supported (only ", kShardVersion, ": uint16 GPT-2 tokens)");
  COHORT_INPUT_CHECK(count >= 0, path, ": the header's token count ", count, " is negative");
  COHORT_INPUT_CHECK(count > 0, path, ": the shard holds no tokens");
  const int64_t body = size - kShardHeaderBytes, want = int64_t(count) * 2;
  COHORT_INPUT_CHECK(body >= want, path, ": truncated: the header says ", count,
                     " tokens but the file holds ", body / 2);
  COHORT_INPUT_CHECK(body == want, path, ": ", body - want, " trailing bytes after the ", count,
                     " tokens the header declares");
  return {path, kShardHeaderBytes, count, 2};
}

TokenFile open_text_file(const std::string& path) { return {path, 0, file_bytes(path), 1}; }

std::vector<std::string> expand_glob(const std::string& pattern) {
  COHORT_INPUT_CHECK(!pattern.empty(),
                     "--data tokens needs --data-path: a shard or a glob "
                     "such as 'dir/*.bin'");
  // A plain path goes through as it is, so a missing file is named as one.
  if (pattern.find_first_of("*?[") == std::string::npos) return {pattern};
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> paths;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  COHORT_INPUT_CHECK(rc != GLOB_NOSPACE, pattern, ": out of memory expanding the glob");
  COHORT_INPUT_CHECK(!paths.empty(), pattern, ": no file matches");
  std::sort(paths.begin(), paths.end());  // byte order, whatever the locale
  return paths;
}

std::vector<std::string> default_text_files(const std::string& dir) {
  std::error_code ec;
  COHORT_INPUT_CHECK(fs::is_directory(dir, ec), "--data text: the default corpus ", dir,
                     " is missing (scripts/setup.sh installs Debian's fortunes; or give "
                     "--data-path FILE)");
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && !e.is_symlink(ec) && e.path().extension() != ".dat")
      paths.push_back(e.path().string());
  COHORT_INPUT_CHECK(!ec && !paths.empty(), "--data text: no text files in the default corpus ",
                     dir);
  std::sort(paths.begin(), paths.end());
  return paths;
}

TokenStream::TokenStream(std::vector<TokenFile> files) : files_(std::move(files)) {
  for (const auto& f : files_) size_ += f.count;
}

std::vector<int32_t> TokenStream::read(int64_t begin, int64_t end, int vocab) const {
  COHORT_CHECK(0 <= begin && begin <= end && end <= size_, "range [", begin, ", ", end, ") of ",
               size_);
  std::vector<int32_t> out(size_t(end - begin));
  std::vector<unsigned char> buf;
  int64_t at = 0;  // the stream position where the current file starts
  for (const auto& f : files_) {
    const int64_t lo = std::max(begin, at), hi = std::min(end, at + f.count);
    at += f.count;
    if (lo >= hi) continue;
    std::ifstream in(f.path, std::ios::binary);
    COHORT_INPUT_CHECK(in.good(), f.path, ": cannot open");
    in.seekg(f.offset + (lo - (at - f.count)) * f.width);
    for (int64_t p = lo; p < hi; p += kReadChunk) {
      const int64_t n = std::min(kReadChunk, hi - p);
      buf.resize(size_t(n * f.width));
      in.read(reinterpret_cast<char*>(buf.data()), std::streamsize(buf.size()));
      COHORT_INPUT_CHECK(in.gcount() == std::streamsize(buf.size()), f.path,
                         ": short read (file changed while reading?)");
      int32_t* dst = out.data() + (p - begin);
      for (int64_t i = 0; i < n; ++i) {
        const int32_t id = f.width == 1 ? buf[size_t(i)]
                                        : int32_t(buf[size_t(2 * i)] | buf[size_t(2 * i + 1)] << 8);
        COHORT_INPUT_CHECK(id < vocab, f.path, ": token ", p + i - (at - f.count), " is ", id,
                           ", outside the model's vocabulary of ", vocab);
        dst[i] = id;
      }
    }
  }
  return out;
}

DataSplit make_token_split(const TokenStream& stream, int64_t context, int vocab, int64_t limit,
                           const std::string& name) {
  COHORT_INPUT_CHECK(context >= 1, name, ": context T must be >= 1, got ", context);
  COHORT_INPUT_CHECK(limit >= 0, "dataset limit must be >= 0, got ", limit);
  const int64_t total = stream.size() > 0 ? (stream.size() - 1) / context : 0;
  COHORT_INPUT_CHECK(total >= 2, files_str(stream.files()), ": ", stream.size(),
                     " tokens, fewer than the ", 2 * context + 1,
                     " that one training and one test window of context T=", context, " need");
  const int64_t test = std::max<int64_t>(1, total / 10), train = total - test;
  DataSplit s;
  s.train = windows(stream, 0, limit > 0 ? std::min(limit, train) : train, context, vocab, name);
  s.test = windows(stream, train, total, context, vocab, name);
  return s;
}

bool is_token_dataset(const std::string& name) { return name == "text" || name == "tokens"; }

DataSplit load_token_dataset(const std::string& name, const std::string& path, int64_t limit,
                             int64_t context, int vocab) {
  std::vector<TokenFile> files;
  if (name == "text") {
    COHORT_INPUT_CHECK(vocab >= kTextVocab, "--data text: bytes need a vocabulary of at least ",
                       kTextVocab, ", the model has ", vocab);
    vocab = kTextVocab;
    if (path.empty()) {
      for (const auto& p : default_text_files()) files.push_back(open_text_file(p));
    } else {
      files.push_back(open_text_file(path));
      check_one_window(files.back(), context);
    }
  } else if (name == "tokens") {
    for (const auto& p : expand_glob(path)) {
      files.push_back(open_token_shard(p));
      check_one_window(files.back(), context);
    }
  } else {
    throw InputError("unknown token dataset '" + name + "' (valid: text, tokens)");
  }
  return make_token_split(TokenStream(std::move(files)), context, vocab, limit, name);
}

}  // namespace cohort
