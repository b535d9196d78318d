# Runs PROGRAM and compares what it prints with EXPECTED (a file), exactly: the README's
# code blocks against the output the README shows (tests/CMakeLists.txt).
execute_process(COMMAND ${PROGRAM} OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} failed (${result}):\n${output}${errors}")
endif()
file(READ ${EXPECTED} expected)
if(NOT output STREQUAL expected)
  message(FATAL_ERROR "${PROGRAM} printed\n${output}\nbut README.md shows\n${expected}")
endif()
