// heed/version.hpp — heed's version, the one place it is written: CMakeLists.txt reads
// it for the project's version (and so for heedConfigVersion.cmake).
//
// Semantic versioning: a public name that is renamed or removed keeps its old spelling,
// [[deprecated]], for one minor release (the README's "Changes" lists them).
#pragma once

#define HEED_VERSION_MAJOR 0
#define HEED_VERSION_MINOR 3
#define HEED_VERSION_PATCH 0
/// One number that compares: 10000 · major + 100 · minor + patch.
#define HEED_VERSION (HEED_VERSION_MAJOR * 10000 + HEED_VERSION_MINOR * 100 + HEED_VERSION_PATCH)
