#!/usr/bin/env bash
# Installs everything cohort needs on Debian 12 (run as root): compiler and
# CMake, oneDNN, OpenMPI, zlib, CLI11, nlohmann-json, GoogleTest, the real
# Fashion-MNIST, PyTorch (the peer in benchmarks and numerics tests), gnuplot
# and matplotlib (plots). Safe to run again.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake git pkg-config
  libdnnl-dev zlib1g-dev libcli11-dev nlohmann-json3-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libbenchmark-dev
  dataset-fashion-mnist
  python3 python3-numpy python3-torch
  gnuplot-nox python3-matplotlib
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
