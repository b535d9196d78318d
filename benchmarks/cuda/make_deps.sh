#!/usr/bin/env bash
# benchmarks/cuda/make_deps.sh — copies Eigen's, Catch2's and nlohmann/json's headers and CMake files
# from this Debian machine into .deps/ (git-ignored), for a GPU machine that has CUDA,
# CMake and ninja but not these packages: carry .deps with the checkout, and run.sh
# points CMake at it.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .deps
mkdir -p .deps/include .deps/lib/cmake .deps/share/eigen3
cp -r /usr/include/eigen3 .deps/include/
cp -r /usr/share/eigen3/cmake .deps/share/eigen3/
cp -r /usr/include/catch2 .deps/include/
cp -r /usr/lib/cmake/Catch2 .deps/lib/cmake/
cp /usr/lib/libCatch2WithMain.a .deps/lib/
cp -r /usr/include/nlohmann .deps/include/
mkdir -p .deps/share/cmake
cp -r /usr/share/cmake/nlohmann_json .deps/share/cmake/
du -sh .deps
