# On the CPU the process's peak resident memory stays within the memory budget plus a fixed
# overhead: the program and its libraries, the data set's host copy (reported as
# data_set_host_bytes) and a few chunks of copying (1 MiB each). Nothing the engine reserves
# goes around the budget: no host copy of the parameters at initialisation, save or load.
#   -DCOMMAND=prog|arg|...   a run with --memory-budget BUDGET and --metrics-out METRICS
#   -DBUDGET=<bytes> -DMETRICS=<file> -DOVERHEAD=<bytes>
string(REPLACE "|" ";" command "${COMMAND}")
file(REMOVE ${METRICS})
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 600)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the run failed (${rc}):\n${out}${err}")
endif()
file(STRINGS ${METRICS} summary REGEX "\"type\":\"summary\"")
string(JSON resident GET "${summary}" peak_resident_bytes)
string(JSON data GET "${summary}" data_set_host_bytes)
math(EXPR allowed "${BUDGET} + ${OVERHEAD} + ${data}")
if(resident EQUAL 0 OR resident GREATER allowed)
  message(FATAL_ERROR "peak resident memory ${resident} bytes, more than the budget ${BUDGET} + ${OVERHEAD} + the data "
                      "set's ${data}:\n${out}")
endif()
message(STATUS "peak resident memory ${resident} bytes, within ${allowed}")
