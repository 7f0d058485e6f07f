// The optimizer's state of a run whose ranks each own a range of it (ZeRO:
// Strategy::optimizer_range tiles the arena, one range a rank), saved as one
// safetensors file per rank beside the checkpoint F instead of gathered
// into it (train/resume.h describes the whole layout):
//   F.optim-g<G>-<r>-of-<N>.safetensors   rank r of N, save generation G:
//     tensors "optimizer.<name>" of shape {end - begin}, the state over the
//     arena's [begin, end); metadata model, optimizer, optimizer.steps,
//     begin, end, parameters (the arena's size), generation.
// F lists them in its metadata "optimizer.shards", a JSON string:
//   {"generation": G, "parameters": P,
//    "files": [{"file": name, "begin": b, "end": e, "bytes": size}, ...]}
// (file names relative to F's folder, ranges tiling [0, P) in order; a run
// with --freeze adds "begin": B, its first trainable parameter, and the
// ranges tile [B, P)).
// A save's generation is one more than the one F lists, so its files never
// overwrite the shards F names: the rename of F is the save's one commit
// point, and a loader that finds a shard differing from F's listing (size,
// range, generation) refuses it by name.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "train/checkpoint.h"

namespace cohort {

constexpr const char* kShardsKey = "optimizer.shards";

struct ShardEntry {
  std::string file;  // relative to the checkpoint's folder
  int64_t begin = 0, end = 0;
  uint64_t bytes = 0;
};

struct ShardListing {
  int64_t generation = 0;
  int64_t parameters = 0;
  int64_t begin = 0;  // the state's first parameter (--freeze)
  std::vector<ShardEntry> files;
};

// The file name (no folder) of rank `rank` of `world`'s shard of generation g.
std::string shard_name(const std::string& checkpoint, int64_t generation, int rank, int world);
// `name` beside the checkpoint: in its folder.
std::string beside(const std::string& checkpoint, const std::string& name);

std::string listing_json(const ShardListing& listing);
// F's listing, validated against an arena of n parameters (ranges in order,
// tiling [begin, n), names without folders; n -1: the listing's own count).
// InputError naming the checkpoint.
ShardListing parse_listing(const std::string& checkpoint, const std::string& text, int64_t n);

// The generation of the shards `checkpoint` lists now (0 where it lists
// none, is absent or unreadable): the next save takes one more.
int64_t listed_generation(const std::string& checkpoint);

// Writes one rank's shard atomically (save_safetensors): the state tensors
// `state` (named `names`, each of end - begin floats) with `metadata` plus
// begin, end and generation. Returns its size in bytes; Error naming it.
uint64_t write_shard(const std::string& path, const std::vector<std::string>& names,
                     const std::vector<Tensor*>& state, int64_t begin, int64_t end,
                     int64_t generation, std::map<std::string, std::string> metadata);

// The reads that restore [begin, end) of the state from the shards a
// checkpoint lists: every listed shard's header is checked against the
// listing first (so every rank judges the files alike), and InputError
// names the shard and what differs.
struct ShardReads {
  struct Read {
    size_t file;         // into indexes
    int64_t src, count;  // the shard's elements [src, src + count)
    int64_t dst;         // at this offset of the rank's state tensors
  };
  std::vector<SafetensorsIndex> indexes;
  std::vector<Read> reads;
};
ShardReads plan_shard_reads(const std::string& checkpoint, const ShardListing& listing,
                            const std::vector<std::string>& names, const std::string& optimizer,
                            int64_t steps, int64_t begin, int64_t end);
// Copies the planned slices into `state` (in `names` order).
void apply_shard_reads(const ShardReads& plan, const std::vector<std::string>& names,
                       const std::vector<Tensor*>& state);

// Where `file` (read from `checkpoint`) lists shards, appends the whole
// state as its single-file layout holds it: tensors "optimizer.<name>" of
// shape {parameters}, read from every shard (validated as above). For tools
// and tests that compare checkpoints; a resume reads only its slices.
void append_listed_state(const std::string& checkpoint, SafetensorsFile& file);

// Removes the shard files beside `checkpoint` ("<F>.optim-*.safetensors")
// that `listing` does not name: a previous save's, once F no longer lists
// them, or an interrupted save's. Best effort.
void remove_stale_shards(const std::string& checkpoint, const ShardListing& listing);

}  // namespace cohort
