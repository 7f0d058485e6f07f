# The ctest label `cluster`: the tests that build a namespace cluster
# (scripts/cluster.sh; tests/parallel/cluster_test.cpp). They run in the
# default suite too, and skip with the reason where there is no root or no
# `ip netns`; `ctest -L cluster` runs only them. Included after the file
# gtest_discover_tests writes, which lists the tests in cohort_tests_TESTS.
foreach(test IN LISTS cohort_tests_TESTS)
  if(test MATCHES "^Cluster")
    set_tests_properties(${test} PROPERTIES LABELS cluster)
  endif()
endforeach()
