#include "train/config.h"

namespace cohort {

std::string TrainConfig::describe() const {
  std::ostringstream os;
  os << "--model " << model << "\n--data " << data << "\n--data-dir " << data_dir
     << "\n--epochs " << epochs << "\n--batch " << batch << "\n--lr " << lr << "\n--optimizer "
     << optimizer << "\n--momentum " << momentum << "\n--weight-decay " << weight_decay
     << "\n--schedule " << schedule << "\n--warmup " << warmup_steps << "\n--clip " << clip_norm
     << "\n--seed " << seed << "\n--repeat " << repeat << "\n--limit " << limit
     << "\n--parallel " << parallel << "\n--replicas " << replicas
     << "\n--stages " << stages << "\n--split " << split << "\n--allreduce " << allreduce << "\n--bucket-mb "
     << bucket_mb << "\n--no-overlap " << !overlap << "\n--accumulate " << accumulate
     << "\n--timeout " << timeout << "\n--deterministic " << deterministic << "\n--load "
     << load << "\n";
  return os.str();
}

}  // namespace cohort
