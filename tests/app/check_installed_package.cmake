# Installs the build to a scratch prefix, builds examples/app against it with
# find_package(cnnengine), runs the app, and runs the installed train_images. Invoked by ctest
# (installed_package_app).
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
# The installed train_images runs from the prefix: it finds its library there.
execute_process(COMMAND ${WORK_DIR}/prefix/bin/train_images --data ${FMNIST} --plan --batch 64
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status OR NOT out MATCHES "chosen: batch 64")
  message(FATAL_ERROR "the installed train_images does not run from its prefix (${status}):\n${out}${err}")
endif()
