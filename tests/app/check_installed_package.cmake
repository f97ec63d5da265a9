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
# The README's three programs, exactly as printed: all build against the package; the first two
# (Fashion-MNIST on the CPU here: a whole run, and a loop of one's own) run and learn;
# the third classifies an image with the first's model, on the best device present.
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "## The library in a few lines" at)
string(SUBSTRING "${readme}" ${at} -1 readme)
foreach(program readme_fit readme_train readme_gpu)
  string(FIND "${readme}" "```cpp\n" begin)
  if(begin EQUAL -1)
    message(FATAL_ERROR "README.md: no C++ block for ${program} under 'The library in a few lines'")
  endif()
  math(EXPR begin "${begin} + 7")
  string(SUBSTRING "${readme}" ${begin} -1 readme)
  string(FIND "${readme}" "```" end)
  string(SUBSTRING "${readme}" 0 ${end} code)
  string(SUBSTRING "${readme}" ${end} -1 readme)
  file(MAKE_DIRECTORY ${WORK_DIR}/${program})
  file(WRITE ${WORK_DIR}/${program}/main.cpp "${code}")
  file(WRITE ${WORK_DIR}/${program}/CMakeLists.txt
       "cmake_minimum_required(VERSION 3.22)\nproject(${program} LANGUAGES CXX)\nset(CMAKE_CXX_STANDARD 20)\n"
       "find_package(cnnengine REQUIRED)\nadd_executable(${program} main.cpp)\n"
       "target_link_libraries(${program} PRIVATE cnnengine::cnnengine)\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/${program} -B ${WORK_DIR}/${program}/build -G ${GENERATOR}
                          -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_CXX_COMPILER=${CXX} RESULT_VARIABLE status
                          OUTPUT_QUIET)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/${program}/build RESULT_VARIABLE build_status
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(status OR build_status)
    message(FATAL_ERROR "the README's program ${program} does not build as printed:\n${out}${err}")
  endif()
endforeach()
foreach(program readme_fit readme_train)
  execute_process(COMMAND ${WORK_DIR}/${program}/build/${program} WORKING_DIRECTORY ${WORK_DIR}/${program}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(status OR NOT EXISTS ${WORK_DIR}/${program}/fashion.ckpt)
    message(FATAL_ERROR "the README's ${program} did not learn or save (${status}):\n${out}${err}")
  endif()
  message(STATUS "the README's ${program}:\n${out}")
endforeach()
set(shoe ${SOURCE_DIR}/tests/train_images/predict_images/fashion_0.png)
execute_process(COMMAND ${WORK_DIR}/readme_gpu/build/readme_gpu ${WORK_DIR}/readme_fit/fashion.ckpt ${shoe}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status OR NOT out MATCHES "Ankle boot [0-9.e-]+")
  message(FATAL_ERROR "the README's readme_gpu did not classify ${shoe} by the classes' names (${status}):\n${out}${err}")
endif()
# A model the library saved is one the command line evaluates: the same class names.
execute_process(COMMAND ${WORK_DIR}/prefix/bin/train_images --load ${WORK_DIR}/readme_fit/fashion.ckpt --evaluate
                        --data ${FMNIST} --limit-eval 200 --quiet
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status OR NOT out MATCHES "test loss [0-9.]+, accuracy [0-9.]+ over 200 samples")
  message(FATAL_ERROR "train_images --evaluate refuses the README's model (${status}):\n${out}${err}")
endif()

# The installed train_images runs from the prefix: it finds its library there.
execute_process(COMMAND ${WORK_DIR}/prefix/bin/train_images --data ${FMNIST} --plan --batch 64
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status OR NOT out MATCHES "chosen: batch 64")
  message(FATAL_ERROR "the installed train_images does not run from its prefix (${status}):\n${out}${err}")
endif()
