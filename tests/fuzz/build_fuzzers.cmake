# cmake -DSRC=<source dir> -DBIN=<build dir> -P build_fuzzers.cmake
# Configures BIN with clang and COHORT_FUZZ=ON and builds the fuzz targets.
find_program(CLANGXX NAMES clang++ clang++-14 REQUIRED)
find_program(CCACHE ccache)
set(launcher "")
if(CCACHE)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CCACHE})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${BIN} -DCMAKE_CXX_COMPILER=${CLANGXX}
                        -DCOHORT_FUZZ=ON -DCOHORT_MPI=OFF -DCOHORT_NATIVE=OFF
                        -DCMAKE_BUILD_TYPE=RelWithDebInfo ${launcher}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring ${BIN} failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} -j2 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building ${BIN} failed")
endif()
