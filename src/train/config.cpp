#include "train/config.h"

#include <sstream>

#include "nn/models/zoo.h"

namespace cohort {

RunSettings TrainConfig::run_settings() const {
  RunSettings r;
  r.model = nn::find_model(model, seq, vocab);
  r.batch = batch;
  r.accumulate = accumulate;
  r.clip_norm = clip_norm;
  r.seed = seed;
  r.precision = precision.resolve();
  return r;
}

std::string TrainConfig::describe() const {
  std::ostringstream os;
  os << "--model " << model << "\n--seq " << seq << "\n--vocab " << vocab << "\n--data " << data
     << "\n--data-dir " << data_dir << "\n--data-path " << data_path
     << "\n--epochs " << epochs << "\n--batch " << batch << "\n--lr " << lr << "\n--optimizer "
     << optimizer << "\n--momentum " << momentum << "\n--weight-decay " << weight_decay
     << "\n--lr-schedule " << schedule << "\n--warmup " << warmup_steps << "\n--clip " << clip_norm
     << "\n--seed " << seed << "\n--repeat " << repeat << "\n--limit " << limit << "\n--eval "
     << eval << "\n--parallel " << parallel << "\n--accumulate " << accumulate << "\n--timeout "
     << timeout << "\n--load " << load << "\n--resume " << resume << "\n--save " << save << "\n"
     << precision.describe() << strategies->describe();
  return os.str();
}

}  // namespace cohort
