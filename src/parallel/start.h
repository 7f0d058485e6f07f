// The start of every multi-rank job: all ranks must build the same model
// from the same flags, and start from rank 0's weights.
#pragma once
#include <string>

#include "comm/communicator.h"
#include "nn/model.h"

namespace cohort {

// Checks that every rank built the same model and was given the same flags;
// throws InputError naming the first parameter (or flag) that differs and the
// rank. Then broadcasts rank 0's parameters and buffers.
void check_and_broadcast(comm::Communicator& comm, nn::Model& model, const std::string& flags);

}  // namespace cohort
