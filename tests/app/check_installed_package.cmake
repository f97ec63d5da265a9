# Installs the build to a scratch prefix, builds examples/app against it with
# find_package(cnnengine), and runs the app. Invoked by ctest (installed_package_app).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE status)
if(status)
  message(FATAL_ERROR "install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/app -B ${WORK_DIR}/build -G ${GENERATOR}
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_CXX_COMPILER=${CXX}
                RESULT_VARIABLE status)
if(status)
  message(FATAL_ERROR "configuring examples/app against the installed package failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE status)
if(status)
  message(FATAL_ERROR "building examples/app against the installed package failed")
endif()
execute_process(COMMAND ${WORK_DIR}/build/cnnengine_app RESULT_VARIABLE status)
if(status)
  message(FATAL_ERROR "examples/app failed")
endif()
