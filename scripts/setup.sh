#!/usr/bin/env bash
# Installs everything cohort needs on Debian 12 (run as root): compiler and
# CMake, oneDNN, OpenMPI, zlib, CLI11, nlohmann-json, GoogleTest, the real
# Fashion-MNIST, PyTorch (the peer in benchmarks and numerics tests), gnuplot
# and matplotlib (plots). OpenBLAS backs PyTorch's matrix products: without it
# Debian's torch falls back to the reference BLAS and would be an unfairly slow
# peer (589 instead of 1,822 images/s for mnist-small on 1 thread).
# ocl-icd-opencl-dev: Debian's libdnnl-dev was built with the OpenCL GPU runtime,
# so its CMake config (dnnl-config.cmake) calls find_package(OpenCL) and fails
# without OpenCL's headers and libOpenCL.so; the package only *recommends* them,
# and --no-install-recommends skips recommendations (issue 12). clang,
# libclang-rt-14-dev (libFuzzer's and the sanitizers' runtimes) and
# libomp-14-dev (OpenMP for clang) build the fuzz targets (ctest -L fuzz).
# procps: the stall tests find a rank's pid with pgrep to SIGSTOP it (a
# minimal Debian root has no pgrep; the test then stopped nothing).
# fortunes, fortunes-min: the default English text of `--data text`
# (/usr/share/games/fortunes, 2.6 MB of quotations, jokes and literature
# without the .dat indexes; data/tokens.h): a real corpus for GPT-style runs
# and tests on a machine with no network.
# python3-torchvision: the PyTorch peer builds torchvision's ImageNet models
# (resnet18/50/101/152, vgg16, vgg16_bn) that cohort's tests load and compare
# logits with (tests/train/torchvision_test.cpp).
# iproute2: ip and tc, which scripts/cluster.sh uses to build the network-namespace
# cluster (ctest label 'cluster'; a minimal Debian root has neither, and the
# cluster tests then skipped).
# /etc/hosts: the localhost lines where there are none (see the end).
# Safe to run again.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake git pkg-config
  libdnnl-dev ocl-icd-opencl-dev zlib1g-dev libcli11-dev nlohmann-json3-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libbenchmark-dev
  dataset-fashion-mnist
  python3 python3-numpy python3-torch python3-torchvision
  libopenblas0-openmp
  gnuplot-nox python3-matplotlib
  clang libclang-rt-14-dev libomp-14-dev
  procps iproute2
  fortunes fortunes-min
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# A root without /etc/hosts (a minimal debootstrap root, as fresh-machine's)
# resolves "localhost" through DNS: every MPI job then waits ~5 s in
# MPI_Init for the lookup to time out (mpirun -np 2 of a short `cohort
# train`: 5.6-10.6 s against 0.57 with the line below; the suite 885 s
# against 292). Debian's own localhost lines, only where none is there.
if ! grep -qs -E '^[[:space:]]*127\.0\.0\.1[[:space:]].*\blocalhost\b' /etc/hosts; then
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >> /etc/hosts
fi
