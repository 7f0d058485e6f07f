// Optimizer-state shards beside a checkpoint: names, F's listing of them,
// writing one, planning the slices a rank's range needs, stale-file cleanup.
#include "train/state_shards.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace cohort {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStatePrefix = "optimizer.";

std::string file_name(const std::string& path) { return fs::path(path).filename().string(); }

std::string stale_prefix(const std::string& checkpoint) { return file_name(checkpoint) + ".optim-"; }

// A shard's metadata value that must equal `want`; InputError naming the shard.
void expect_meta(const SafetensorsIndex& shard, const std::string& checkpoint,
                 const std::string& key, const std::string& want) {
  auto it = shard.metadata.find(key);
  const std::string got = it == shard.metadata.end() ? "(none)" : one_line(it->second);
  if (got != want)
    throw InputError("checkpoint " + checkpoint + ": optimizer shard " + shard.path + " has " +
                     key + " " + got + " where the checkpoint lists " + want +
                     " (another save's shard, or a damaged one)");
}

}  // namespace

std::string shard_name(const std::string& checkpoint, int64_t generation, int rank, int world) {
  char part[64];
  std::snprintf(part, sizeof part, "g%lld-%02d-of-%02d", static_cast<long long>(generation), rank,
                world);
  return stale_prefix(checkpoint) + part + ".safetensors";
}

std::string beside(const std::string& checkpoint, const std::string& name) {
  return (fs::path(checkpoint).parent_path() / name).string();
}

std::string listing_json(const ShardListing& listing) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const ShardEntry& e : listing.files)
    files.push_back({{"file", e.file}, {"begin", e.begin}, {"end", e.end}, {"bytes", e.bytes}});
  nlohmann::ordered_json j{{"generation", listing.generation},
                           {"parameters", listing.parameters}};
  if (listing.begin > 0) j["begin"] = listing.begin;
  j["files"] = files;
  return j.dump();
}

ShardListing parse_listing(const std::string& checkpoint, const std::string& text, int64_t n) {
  auto bad = [&](const std::string& why) {
    return InputError("checkpoint " + checkpoint + ": metadata '" + kShardsKey + "' " + why);
  };
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("generation") || !j.contains("parameters") ||
      !j.contains("files") || !j["files"].is_array() || !j["generation"].is_number_integer() ||
      !j["parameters"].is_number_integer())
    throw bad("is not {generation, parameters, files: [...]}");
  ShardListing out;
  out.generation = j["generation"].get<int64_t>();
  out.parameters = j["parameters"].get<int64_t>();
  if (n < 0) n = out.parameters;  // the listing's own
  if (out.parameters != n || n < 0)
    throw bad("covers " + std::to_string(out.parameters) + " parameters, the model has " +
              std::to_string(n));
  if (j.contains("begin")) {
    if (!j["begin"].is_number_integer() || j["begin"].get<int64_t>() < 0 ||
        j["begin"].get<int64_t>() >= n)
      throw bad("has a 'begin' that is not a parameter index below " + std::to_string(n));
    out.begin = j["begin"].get<int64_t>();
  }
  int64_t next = out.begin;
  for (const nlohmann::json& f : j["files"]) {
    if (!f.is_object() || !f.contains("file") || !f["file"].is_string() ||
        !f.contains("begin") || !f["begin"].is_number_integer() || !f.contains("end") ||
        !f["end"].is_number_integer() || !f.contains("bytes") ||
        !f["bytes"].is_number_unsigned())
      throw bad("has an entry that is not {file, begin, end, bytes}");
    ShardEntry e{f["file"].get<std::string>(), f["begin"].get<int64_t>(), f["end"].get<int64_t>(),
                 f["bytes"].get<uint64_t>()};
    if (e.file.empty() || e.file.find('/') != std::string::npos || e.file == "." ||
        e.file == "..")
      throw bad("names '" + one_line(e.file) + "', not a file beside the checkpoint");
    if (e.begin != next || e.end <= e.begin)
      throw bad("lists " + e.file + " at [" + std::to_string(e.begin) + ", " +
                std::to_string(e.end) + "), not from " + std::to_string(next));
    next = e.end;
    out.files.push_back(std::move(e));
  }
  if (next != n)
    throw bad("covers [" + std::to_string(out.begin) + ", " + std::to_string(next) + ") of " +
              std::to_string(n));
  return out;
}

int64_t listed_generation(const std::string& checkpoint) {
  std::error_code ec;
  if (!fs::is_regular_file(checkpoint, ec)) return 0;
  try {
    const SafetensorsIndex f = index_safetensors(checkpoint);
    auto it = f.metadata.find(kShardsKey);
    if (it == f.metadata.end()) return 0;
    const nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
    if (j.is_object() && j.contains("generation") && j["generation"].is_number_integer())
      return j["generation"].get<int64_t>();
  } catch (const InputError&) {  // a damaged F lists nothing a save could overwrite
  }
  return 0;
}

uint64_t write_shard(const std::string& path, const std::vector<std::string>& names,
                     const std::vector<Tensor*>& state, int64_t begin, int64_t end,
                     int64_t generation, std::map<std::string, std::string> metadata) {
  COHORT_CHECK(names.size() == state.size(), "optimizer state tensors and names");
  std::vector<NamedTensor> tensors;
  for (size_t i = 0; i < names.size(); ++i) {
    COHORT_CHECK(state[i]->numel() == end - begin, "optimizer shard ", path, ": tensor ", names[i],
                 " holds ", state[i]->numel(), " elements, the range ", end - begin);
    tensors.push_back({kStatePrefix + names[i], *state[i]});
  }
  metadata["begin"] = std::to_string(begin);
  metadata["end"] = std::to_string(end);
  metadata["generation"] = std::to_string(generation);
  return save_safetensors(path, tensors, metadata);
}

ShardReads plan_shard_reads(const std::string& checkpoint, const ShardListing& listing,
                            const std::vector<std::string>& names, const std::string& optimizer,
                            int64_t steps, int64_t begin, int64_t end) {
  ShardReads plan;
  for (const ShardEntry& e : listing.files) {
    const std::string path = beside(checkpoint, e.file);
    std::error_code ec;
    const uintmax_t size = fs::file_size(path, ec);
    if (ec)
      throw InputError("checkpoint " + checkpoint + " lists optimizer shard " + path +
                       ", which cannot be read: " + ec.message());
    if (size != e.bytes)
      throw InputError("checkpoint " + checkpoint + ": optimizer shard " + path + " is " +
                       std::to_string(size) + " bytes, the checkpoint lists " +
                       std::to_string(e.bytes) + " (truncated, or another save's)");
    SafetensorsIndex shard = index_safetensors(path);
    expect_meta(shard, checkpoint, "generation", std::to_string(listing.generation));
    expect_meta(shard, checkpoint, "begin", std::to_string(e.begin));
    expect_meta(shard, checkpoint, "end", std::to_string(e.end));
    expect_meta(shard, checkpoint, "optimizer", optimizer);
    expect_meta(shard, checkpoint, "optimizer.steps", std::to_string(steps));
    for (const std::string& s : names) {
      const std::string tensor = kStatePrefix + s;
      const SafetensorsIndex::Entry* t = shard.find(tensor);
      if (!t)
        throw InputError("checkpoint " + checkpoint + ": optimizer shard " + path +
                         ": tensor '" + tensor + "' is missing");
      if (t->dtype != DType::kF32 || t->shape != Shape{e.end - e.begin})
        throw InputError("checkpoint " + checkpoint + ": optimizer shard " + path +
                         ": tensor '" + tensor + "' has shape " + shape_str(t->shape) +
                         ", its range needs F32 " + shape_str(Shape{e.end - e.begin}));
    }
    const int64_t lo = std::max(begin, e.begin), hi = std::min(end, e.end);
    if (lo < hi) plan.reads.push_back({plan.indexes.size(), lo - e.begin, hi - lo, lo - begin});
    plan.indexes.push_back(std::move(shard));
  }
  return plan;
}

void apply_shard_reads(const ShardReads& plan, const std::vector<std::string>& names,
                       const std::vector<Tensor*>& state) {
  COHORT_CHECK(names.size() == state.size(), "optimizer state tensors and names");
  for (size_t i = 0; i < names.size(); ++i)
    for (const ShardReads::Read& r : plan.reads)
      read_f32_slice(plan.indexes[r.file], kStatePrefix + names[i], r.src, r.src + r.count,
                     state[i]->f32() + r.dst);
}

void append_listed_state(const std::string& checkpoint, SafetensorsFile& file) {
  auto listed = file.metadata.find(kShardsKey);
  if (listed == file.metadata.end()) return;
  const ShardListing listing = parse_listing(checkpoint, listed->second, -1);
  COHORT_INPUT_CHECK(!listing.files.empty(), "checkpoint ", checkpoint, " lists no shards");
  std::vector<std::string> names;  // the state's, as the first shard names them
  for (const SafetensorsIndex::Entry& e :
       index_safetensors(beside(checkpoint, listing.files.front().file)).entries)
    if (e.name.rfind(kStatePrefix, 0) == 0) names.push_back(e.name.substr(strlen(kStatePrefix)));
  auto meta = [&](const std::string& key) {
    auto it = file.metadata.find(key);
    return it == file.metadata.end() ? std::string("(none)") : it->second;
  };
  const std::string steps_text = meta("optimizer.steps");
  int64_t steps = -1;
  std::from_chars(steps_text.data(), steps_text.data() + steps_text.size(), steps);
  // The state over [begin, P): as a gathered checkpoint of a --freeze run holds it.
  const int64_t b = listing.begin, n = listing.parameters;
  const ShardReads plan =
      plan_shard_reads(checkpoint, listing, names, meta("optimizer"), steps, b, n);
  std::vector<Tensor> whole;
  std::vector<Tensor*> dst;
  for (size_t i = 0; i < names.size(); ++i) whole.push_back(Tensor::empty({n - b}));
  for (Tensor& t : whole) dst.push_back(&t);
  apply_shard_reads(plan, names, dst);
  for (size_t i = 0; i < names.size(); ++i)
    file.tensors.push_back({kStatePrefix + names[i], whole[i]});
}

void remove_stale_shards(const std::string& checkpoint, const ShardListing& listing) {
  const std::string prefix = stale_prefix(checkpoint);
  fs::path dir = fs::path(checkpoint).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string suffix = ".safetensors";
    if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    bool listed = false;
    for (const ShardEntry& e : listing.files) listed = listed || e.file == name;
    std::error_code rm;
    if (!listed && entry.is_regular_file(rm)) fs::remove(entry.path(), rm);
  }
}

}  // namespace cohort
