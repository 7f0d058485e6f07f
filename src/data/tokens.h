// Token streams for next-token training (GPT-style models): llm.c's GPT-2
// token shards (`--data tokens`) and any text as bytes (`--data text`), cut
// into windows of a context T.
//
// Sample i is tokens[i*T, i*T + T) as its inputs (i32 {T}) and
// tokens[i*T + 1, i*T + T + 1) as its T targets: windows do not overlap, and
// consecutive windows share one token (window i's last target is window
// i+1's first input). Train holds the first 90% of the stream's windows, test
// (held out) the last 10% (at least one): the cut falls on a window boundary,
// so the last training target is the first test input and no test window is
// ever seen whole in training.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace cohort {

// llm.c's shard (dev/data/data_common.py write_datafile, llmc/dataloader.h):
// a header of 256 little-endian int32 (magic, version, number of tokens, the
// rest zero), then that many little-endian uint16 tokens (GPT-2 ids).
inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int64_t kShardHeaderBytes = 256 * 4;

// `--data text` without --data-path: every fortune cookie file of Debian's
// fortunes and fortunes-min packages (English quotations, jokes, poems,
// literature; scripts/setup.sh installs them): the 43 regular files of this
// folder that are not the binary `.dat` indexes (the `.u8` names are symlinks
// to them, skipped), concatenated in sorted name order: 2,576,674 bytes
// (Debian 12, fortunes 1:1.99.1-7.3).
inline constexpr const char* kDefaultTextDir = "/usr/share/games/fortunes";

// Where one file's tokens lie: `count` tokens of `width` bytes (1: text
// bytes, 2: uint16 shard tokens) starting at byte `offset`.
struct TokenFile {
  std::string path;
  int64_t offset = 0, count = 0;
  int width = 1;
};

// Validates a shard's header against its size; allocates nothing. InputError
// naming the file if it is missing, empty, shorter than the header, has the
// wrong magic or version, a negative count, fewer tokens than the header
// says (truncated) or bytes after them.
TokenFile open_token_shard(const std::string& path);
// A text file as bytes; InputError naming it if missing or empty.
TokenFile open_text_file(const std::string& path);

// The files a glob matches, sorted; InputError naming the pattern if none.
std::vector<std::string> expand_glob(const std::string& pattern);
// The default corpus's files (see kDefaultTextDir), sorted; InputError naming
// the folder, and how to get it, if it is missing or has none.
std::vector<std::string> default_text_files(const std::string& dir = kDefaultTextDir);

// Files read as one stream, in order.
class TokenStream {
 public:
  explicit TokenStream(std::vector<TokenFile> files);
  int64_t size() const { return size_; }
  const std::vector<TokenFile>& files() const { return files_; }
  // Tokens [begin, end) of the stream. Any id >= vocab is an InputError
  // naming the file, the token's position in it and the id.
  std::vector<int32_t> read(int64_t begin, int64_t end, int vocab) const;

 private:
  std::vector<TokenFile> files_;
  int64_t size_ = 0;
};

// The stream's windows of `context` tokens, split as above; limit > 0 keeps
// the first `limit` training windows (and reads only those). InputError if
// the stream is too short for one training and one test window (2T + 1
// tokens). Both sets get num_classes = vocab and `name`.
DataSplit make_token_split(const TokenStream& stream, int64_t context, int vocab, int64_t limit,
                           const std::string& name);

// True for the names load_token_dataset reads ("text", "tokens").
bool is_token_dataset(const std::string& name);

// name "text": path is a text file (empty: the default corpus), vocab 256
// (the model's `vocab` must be at least that). name "tokens": path is a shard
// or a glob of shards (sorted, read as one stream); every id must be < vocab.
// context: the model's T. Any problem with the name, files or tokens ->
// InputError.
DataSplit load_token_dataset(const std::string& name, const std::string& path, int64_t limit,
                             int64_t context, int vocab);

}  // namespace cohort
