# train_images --plan on networks 10,000 layers deep, written at test time: planning is
# near-linear in depth for every recomputation policy and step-buffer strategy (docs/design.md,
# "Recomputation"), and the TIMEOUT is the guard against a plan that hangs. They carry the label
# timing: a wall-clock guard means nothing under the sanitizers, which slow planning about tenfold
# (5 s here became 46 s to over 60 s there, the pool's under a loaded CI host), so that stage leaves
# them out. Included from tests/CMakeLists.txt, whose add_run_check, ${scratch} and ${FMNIST} it uses.
set(deep ${scratch}/deep_networks)
add_test(NAME plan_deep_networks_written COMMAND ${CMAKE_COMMAND} -DOUT=${deep} -DLAYERS=10000
  -P ${CMAKE_CURRENT_SOURCE_DIR}/train_images/write_deep_networks.cmake)
set_tests_properties(plan_deep_networks_written PROPERTIES FIXTURES_SETUP deep_networks)

set(deep_plan $<TARGET_FILE:train_images>|--data|${FMNIST}|--plan|--threads|2)
foreach(network relus residual)
  foreach(policy none cheap auto)
    add_run_check(plan_deep_network_${network}_${policy}
      -DCOMMAND=${deep_plan}|--model|${deep}/${network}.txt|--recompute|${policy}|--memory-budget|1GiB
      -DEXPECT_RC=0 "-DEXPECT_OUTPUT=chosen: batch 64 = [0-9]+ x micro-batch")
    set_tests_properties(plan_deep_network_${network}_${policy} PROPERTIES TIMEOUT 60 LABELS timing
      FIXTURES_REQUIRED deep_networks)
  endforeach()
  add_run_check(plan_deep_network_${network}_pool
    -DCOMMAND=${deep_plan}|--model|${deep}/${network}.txt|--allocator|pool|--memory-budget|1GiB
    -DEXPECT_RC=0 "-DEXPECT_OUTPUT=chosen: batch 64 = [0-9]+ x micro-batch")
  set_tests_properties(plan_deep_network_${network}_pool PROPERTIES TIMEOUT 60 LABELS timing
    FIXTURES_REQUIRED deep_networks)
endforeach()
