# ptsuite_test(NAME SOURCES... [LIBS ...] [RANKS N...] [ARGS ...])
# Declares a GoogleTest executable and its CTest entries in one line. With RANKS the test is
# an MPI test launched as `mpirun -np N --oversubscribe` (one CTest entry NAME_npN per N,
# one OpenBLAS thread per rank) and uses the MPI-aware main in core/testing.
set(PTSUITE_MPIRUN_FLAGS --oversubscribe --allow-run-as-root -x OPENBLAS_NUM_THREADS=1
    --bind-to none)
function(ptsuite_test NAME)
  cmake_parse_arguments(T "" "" "LIBS;ARGS;RANKS" ${ARGN})
  add_executable(${NAME} ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${NAME} PRIVATE ${T_LIBS} GTest::gtest ptsuite_options)
  if(T_RANKS)
    target_link_libraries(${NAME} PRIVATE ptsuite_mpi_test_main)
    foreach(n ${T_RANKS})
      add_test(NAME ${NAME}_np${n} COMMAND ${MPIEXEC_EXECUTABLE} ${PTSUITE_MPIRUN_FLAGS} -np ${n}
               $<TARGET_FILE:${NAME}> ${T_ARGS})
      set_tests_properties(${NAME}_np${n} PROPERTIES PROCESSORS ${n} LABELS mpi TIMEOUT 600)
    endforeach()
  else()
    target_link_libraries(${NAME} PRIVATE GTest::gtest_main)
    add_test(NAME ${NAME} COMMAND ${NAME} ${T_ARGS})
    set_tests_properties(${NAME} PROPERTIES ENVIRONMENT OPENBLAS_NUM_THREADS=1 LABELS unit TIMEOUT 300)
  endif()
endfunction()
