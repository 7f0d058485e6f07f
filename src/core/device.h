// Where a tensor's memory lives. Only the CPU is built today; a CUDA backend
// adds its allocator (core/memory.h) and its ops (ops/cuda/) behind the same
// enum, so no code outside those folders tests for a device by hand.
#pragma once

namespace cohort {

enum class Device { kCpu, kCuda };

constexpr const char* device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

}  // namespace cohort
