# Options for heed's own targets (tests, examples, benchmarks); the heed::heed target
# itself imposes no flags on its users.

if(HEED_WITH_OPENMP)
  find_package(OpenMP COMPONENTS CXX)
endif()

# Warnings are errors in the project's own build.
function(heed_strict_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Werror)
  endif()
endfunction()

# Examples and benchmarks: warnings as errors, OpenMP when found, and -O3
# -march=native unless HEED_NATIVE is OFF (Eigen's speed depends on the ISA).
function(heed_program target)
  heed_strict_warnings(${target})
  target_link_libraries(${target} PRIVATE heed::heed)
  if(OpenMP_CXX_FOUND)
    target_link_libraries(${target} PRIVATE OpenMP::OpenMP_CXX)
  endif()
  if(HEED_NATIVE AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -O3 -march=native)
    # GCC 12's own avx512fintrin.h trips -W(maybe-)uninitialized once Eigen inlines it
    # (GCC PR 105593, fixed in GCC 13): false positives inside the compiler's header.
    # The tests, built without -march=native, keep both warnings on for heed itself.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE -Wno-uninitialized -Wno-maybe-uninitialized)
    endif()
  endif()
endfunction()
