# The ctest label `fuzz`: fuzz_build configures and builds build/fuzz with
# clang (COHORT_FUZZ=ON), then each fuzz_<name> runs tests/fuzz/<name>_fuzz
# for 60 s from its seed corpus. Registered only with -DCOHORT_FUZZ_TESTS=ON
# (60 s each, and they need clang), so the default run's summary counts every
# test it has as run: configure with the option, then `ctest -L fuzz`.
set(COHORT_FUZZ_TARGETS idx cifar safetensors grid tokens)
set(COHORT_FUZZ_DIR ${CMAKE_BINARY_DIR}/fuzz)
add_test(NAME fuzz_build
         COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR} -DBIN=${COHORT_FUZZ_DIR}
                 -P ${CMAKE_SOURCE_DIR}/tests/fuzz/build_fuzzers.cmake)
set_tests_properties(fuzz_build PROPERTIES LABELS fuzz FIXTURES_SETUP fuzzers TIMEOUT 1800)
foreach(name IN LISTS COHORT_FUZZ_TARGETS)
  add_test(NAME fuzz_${name}
           COMMAND ${CMAKE_SOURCE_DIR}/tests/fuzz/run_fuzzer.sh ${COHORT_FUZZ_DIR} ${name}
                   ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${name} 60)
  set_tests_properties(fuzz_${name} PROPERTIES LABELS fuzz FIXTURES_REQUIRED fuzzers
                       TIMEOUT 300)
endforeach()
