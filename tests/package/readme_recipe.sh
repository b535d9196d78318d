#!/usr/bin/env bash
# The README's recipe for heed's compiled library without CMake (the sh block after
# "Without CMake, build the files of src/compiled"), run as written on consumer.cpp as
# main.cpp, heed's source tree as heed/, but at -O0 (the README says so): it must build
# the archive, link and run.
#   readme_recipe.sh README HEED_SOURCE_DIR CXX EIGEN_INCLUDE WORK_DIR
set -euo pipefail
readme=$1 source=$2 cxx=$3 eigen=$4 work=$5
block=$(awk '/Without CMake, build the files of/ {found = 1}
  found && /^```sh$/ {inside = 1; next}
  inside && /^```$/ {exit}
  inside' "$readme")
[ -n "$block" ] || { echo "FAILED: no recipe after 'Without CMake, build the files of' in $readme"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
ln -s "$source" "$work/heed"
cp "$source/tests/package/consumer.cpp" "$work/main.cpp"
block=${block//-O3 -march=native/-O0 -g0}
block=${block//g++ /$cxx }
block=${block//\/usr\/include\/eigen3/$eigen}
echo "$block"
(cd "$work" && bash -euo pipefail -c "$block")
"$work/main"
echo "the README's recipe built and ran"
