# Builds and runs the consumer with nothing but the compiler: `-I include` and Eigen.
# Arguments: CXX, HEED_INCLUDE, EIGEN_INCLUDE, SOURCE, OUTPUT.
get_filename_component(output_dir ${OUTPUT} DIRECTORY)
file(MAKE_DIRECTORY ${output_dir})
execute_process(COMMAND ${CXX} -std=c++17 -O1 -I${HEED_INCLUDE} -I${EIGEN_INCLUDE} ${SOURCE} -o ${OUTPUT}
  RESULT_VARIABLE compile_result)
if(NOT compile_result EQUAL 0)
  message(FATAL_ERROR "compiling ${SOURCE} with plain -I flags failed")
endif()
execute_process(COMMAND ${OUTPUT} RESULT_VARIABLE run_result)
if(NOT run_result EQUAL 0)
  message(FATAL_ERROR "${OUTPUT} failed")
endif()
