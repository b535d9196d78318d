# Fails when an object of heed_header_check has an undefined symbol of heed: a function
# declared by what one public header brings in, but defined only in a header it does
# not bring in (the file would compile and fail to link). heed is header-only, so every
# heed symbol a file uses must be defined in that file.
#   cmake -DNM=nm -DCALLING=n -DOBJECTS="a.o|b.o|..." -P check.cmake
string(REPLACE "|" ";" objects "${OBJECTS}")
list(LENGTH objects count)
set(failures "")
foreach(object IN LISTS objects)
  execute_process(COMMAND ${NM} -C --undefined-only ${object} OUTPUT_VARIABLE undefined RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "link check: ${NM} failed on ${object}")
  endif()
  string(REGEX MATCHALL "[^\n]*heed::[^\n]*" missing "${undefined}")
  if(missing)
    get_filename_component(name ${object} NAME)
    string(REPLACE ";" "\n    " missing "${missing}")
    string(APPEND failures "  ${name}:\n    ${missing}\n")
  endif()
endforeach()
if(failures)
  message(FATAL_ERROR "link check: heed functions declared but not defined by the header alone:\n${failures}")
endif()
message(STATUS "link check: ${count} headers alone, ${CALLING} of them calling every method of Tensor: no heed function left undefined")
