# Options for heed's own targets (tests, examples, benchmarks); the heed::heed target
# itself imposes no flags on its users.

if(HEED_WITH_OPENMP)
  find_package(OpenMP COMPONENTS CXX)
endif()

# Warnings are errors in the project's own build (HEED_WARNINGS_AS_ERRORS, ON by default).
function(heed_strict_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic $<$<BOOL:${HEED_WARNINGS_AS_ERRORS}>:-Werror>)
  endif()
endfunction()

# Examples and benchmarks: warnings as errors, OpenMP when found, and -O3
# -march=native unless HEED_NATIVE is OFF (Eigen's speed depends on the ISA); linked to
# heed::compiled (FLOAT: heed::compiled_float, a program of floats), built with the same
# options, where HEED_BUILD_COMPILED is ON, unless HEADER_ONLY (a program of the CUDA
# backend, which heed::compiled leaves out).
function(heed_program target)
  cmake_parse_arguments(arg "HEADER_ONLY;FLOAT" "" "" ${ARGN})
  heed_strict_warnings(${target})
  if(HEED_BUILD_COMPILED AND NOT arg_HEADER_ONLY AND arg_FLOAT)
    target_link_libraries(${target} PRIVATE heed::compiled_float)
  elseif(HEED_BUILD_COMPILED AND NOT arg_HEADER_ONLY)
    target_link_libraries(${target} PRIVATE heed::compiled)
  else()
    target_link_libraries(${target} PRIVATE heed::heed)
  endif()
  if(OpenMP_CXX_FOUND)
    target_link_libraries(${target} PRIVATE OpenMP::OpenMP_CXX)
  endif()
  if(HEED_NATIVE AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -O3 -march=native)
    heed_native_warnings(${target})
  endif()
endfunction()

# GCC 12's own avx512fintrin.h trips -W(maybe-)uninitialized once Eigen inlines it
# (GCC PR 105593, fixed in GCC 13): false positives inside the compiler's header, in
# whatever is built with -march=native. clang's -Wsometimes-uninitialized (the asan
# preset) still checks heed itself.
function(heed_native_warnings target)
  if(HEED_NATIVE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-uninitialized -Wno-maybe-uninitialized)
  endif()
endfunction()

# heed::compiled: the explicit instantiations of src/compiled (see heed/compiled.hpp) in
# two static libraries: ${target}_float (float, std::int64_t, bool, and the
# non-template functions) and ${target} (double), which links the first, so that a
# program of floats builds only the first. The libraries and their users must agree on
# the instruction set (Eigen's vectorisation and alignment depend on it), so NATIVE
# builds them like heed_program (-O3 -march=native) and passes -march=native on to
# whatever links them; without NATIVE they take the build's flags alone, as the tests
# do. HEED_COMPILED (PUBLIC) makes heed/heed.hpp declare the instantiations extern,
# HEED_COMPILED_DOUBLE those for double; HEED_COMPILED_CHECKPOINTS adds the checkpoint
# functions, which need nlohmann/json.
function(heed_add_compiled target)
  cmake_parse_arguments(arg "NATIVE" "" "" ${ARGN})
  set(dir ${PROJECT_SOURCE_DIR}/src/compiled)
  add_library(${target}_float STATIC ${dir}/core.cpp ${dir}/non_templates.cpp ${dir}/ops_math_float.cpp
    ${dir}/ops_layers_float.cpp ${dir}/ops_shape.cpp ${dir}/nn.cpp ${dir}/seq2seq_float.cpp)
  add_library(${target} STATIC ${dir}/core_double.cpp ${dir}/ops_math_double.cpp ${dir}/ops_layers_double.cpp
    ${dir}/nn_double.cpp ${dir}/seq2seq_double.cpp)
  target_link_libraries(${target}_float PUBLIC heed)
  target_link_libraries(${target} PUBLIC ${target}_float)
  target_compile_definitions(${target}_float PUBLIC HEED_COMPILED)
  target_compile_definitions(${target} PUBLIC HEED_COMPILED_DOUBLE)
  if(HEED_WITH_NLOHMANN_JSON)
    target_compile_definitions(${target}_float PUBLIC HEED_COMPILED_CHECKPOINTS)
  endif()
  # heed/detail/parallel.hpp is OpenMP code: the library's users need the runtime, and
  # their own copies of heed's inline functions should be the library's.
  if(OpenMP_CXX_FOUND)
    target_link_libraries(${target}_float PUBLIC OpenMP::OpenMP_CXX)
  endif()
  foreach(library ${target}_float ${target})
    set_target_properties(${library} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    heed_strict_warnings(${library})
    target_compile_options(${library} PRIVATE ${HEED_COMPILED_OPTIONS})
    if(arg_NATIVE AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
      target_compile_options(${library} PRIVATE -O3 PUBLIC -march=native)
      heed_native_warnings(${library})
    endif()
  endforeach()
endfunction()
