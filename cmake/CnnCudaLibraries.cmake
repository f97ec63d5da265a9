# Finds the CUDA libraries the backend links beyond the toolkit's runtime (cuDNN, cuBLAS with
# cuBLASLt, NCCL) wherever a machine has them:
#   1. <PREFIX>_ROOT (a cache variable or the environment), then the CUDA toolkit's prefix;
#   2. the NVIDIA Python wheels of the first python3 on the PATH that has them (PyTorch's
#      environment: nvidia/cudnn, nvidia/cu13 or nvidia/cublas, nvidia/nccl).
# The wheels hold only versioned libraries (libcudnn.so.9, libcublas.so.13, libnccl.so.2) and no
# development symlink, so the versioned names are searched too. Each library found becomes an
# imported target, cnn::<name>, carrying its headers; the build's run path then finds it, and so
# does the installed plugin (INSTALL_RPATH_USE_LINK_PATH on cnnengine_cuda).

# The folders of the Python packages `modules` (e.g. nvidia.cudnn), as python3 finds them: `var`
# is empty where there is no python3 or none of them. Asked once per configure.
function(cnn_python_package_dirs var)
  set(dirs)
  if(NOT DEFINED CNN_PYTHON3_FOR_WHEELS)
    find_program(CNN_PYTHON3_FOR_WHEELS NAMES python3 DOC "The python3 whose NVIDIA wheels may hold cuDNN, cuBLAS, NCCL")
  endif()
  if(CNN_PYTHON3_FOR_WHEELS)
    execute_process(
      COMMAND ${CNN_PYTHON3_FOR_WHEELS} -c
        "import importlib, sys\nfor m in sys.argv[1:]:\n    try: print(*importlib.import_module(m).__path__, sep='\\n')\n    except Exception: pass"
        ${ARGN}
      OUTPUT_VARIABLE out ERROR_QUIET RESULT_VARIABLE rc TIMEOUT 30)
    if(rc EQUAL 0 AND out)
      string(STRIP "${out}" out)
      string(REPLACE "\n" ";" dirs "${out}")
    endif()
  endif()
  set(${var} ${dirs} PARENT_SCOPE)
endfunction()

# cnn_find_cuda_library(<name> PREFIX <cache prefix> HEADER <file> NAMES <library names...>
#                       WHEELS <python packages...>)
# Sets <PREFIX>_INCLUDE_DIR and <PREFIX>_LIBRARY (cache) and, when both are found, makes the
# imported target cnn::<name>. Where the header sits in a folder that holds a CUDA runtime of its
# own (a wheel's nvidia/cu13/include), the target adds it after the toolkit's headers, so that
# nvcc's runtime headers are the ones compiled against.
function(cnn_find_cuda_library name)
  cmake_parse_arguments(ARG "" "PREFIX;HEADER" "NAMES;WHEELS" ${ARGN})
  set(roots)
  foreach(root IN ITEMS "${${ARG_PREFIX}_ROOT}" "$ENV{${ARG_PREFIX}_ROOT}")
    if(root)
      list(APPEND roots "${root}")
    endif()
  endforeach()
  set(include_hints ${CUDAToolkit_INCLUDE_DIRS})
  set(library_hints ${CUDAToolkit_LIBRARY_DIR})
  foreach(root IN LISTS roots)
    list(PREPEND include_hints ${root}/include)
    list(PREPEND library_hints ${root}/lib ${root}/lib64)
  endforeach()
  # The toolkit and the roots first; then, only where they lack it, python3's wheels.
  find_path(${ARG_PREFIX}_INCLUDE_DIR ${ARG_HEADER} HINTS ${include_hints})
  find_library(${ARG_PREFIX}_LIBRARY NAMES ${ARG_NAMES} HINTS ${library_hints})
  if(NOT ${ARG_PREFIX}_INCLUDE_DIR OR NOT ${ARG_PREFIX}_LIBRARY)
    cnn_python_package_dirs(wheel_dirs ${ARG_WHEELS})
    foreach(dir IN LISTS wheel_dirs)
      if(NOT ${ARG_PREFIX}_INCLUDE_DIR)
        find_path(${ARG_PREFIX}_INCLUDE_DIR ${ARG_HEADER} HINTS ${dir}/include NO_DEFAULT_PATH)
      endif()
      if(NOT ${ARG_PREFIX}_LIBRARY)
        find_library(${ARG_PREFIX}_LIBRARY NAMES ${ARG_NAMES} HINTS ${dir}/lib NO_DEFAULT_PATH)
      endif()
    endforeach()
  endif()
  if(NOT ${ARG_PREFIX}_INCLUDE_DIR OR NOT ${ARG_PREFIX}_LIBRARY OR TARGET cnn::${name})
    return()
  endif()
  add_library(cnn::${name} UNKNOWN IMPORTED)
  set_target_properties(cnn::${name} PROPERTIES IMPORTED_LOCATION "${${ARG_PREFIX}_LIBRARY}")
  list(FIND CUDAToolkit_INCLUDE_DIRS "${${ARG_PREFIX}_INCLUDE_DIR}" in_toolkit)
  if(in_toolkit EQUAL -1 AND EXISTS "${${ARG_PREFIX}_INCLUDE_DIR}/cuda_runtime_api.h")
    foreach(lang CXX CUDA)
      set(CMAKE_${lang}_STANDARD_INCLUDE_DIRECTORIES ${CMAKE_${lang}_STANDARD_INCLUDE_DIRECTORIES}
          "${${ARG_PREFIX}_INCLUDE_DIR}" PARENT_SCOPE)
    endforeach()
  else()
    set_target_properties(cnn::${name} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${${ARG_PREFIX}_INCLUDE_DIR}")
  endif()
endfunction()
