# Locates libtorch from the project's pinned PyPI wheel (.venv, made by scripts/install-deps.sh)
# unless Torch_DIR is given, and decides CUDA support. Only the runtime uses libtorch; the launcher
# never links it, so a missing libtorch only disables the runtime.
set(HPCTRAIN_TORCH_VERSION "none")
set(HPCTRAIN_TORCH_CUDA "")
option(HPCTRAIN_RUNTIME
       "Build the libtorch runtime (hpctrain-worker); OFF: the launcher and torch-free libraries" ON)
set(HPCTRAIN_PYTHON "" CACHE FILEPATH "Python of the pinned torch wheel (default: .venv/bin/python)")
if(NOT HPCTRAIN_PYTHON AND EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  set(HPCTRAIN_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH "" FORCE)
endif()
if(HPCTRAIN_PYTHON AND HPCTRAIN_RUNTIME)
  execute_process(
    COMMAND "${HPCTRAIN_PYTHON}" -c
      "import torch;print(torch.__version__);print(torch.utils.cmake_prefix_path);print(torch.version.cuda or '')"
    OUTPUT_VARIABLE _torch_out ERROR_VARIABLE _torch_err RESULT_VARIABLE _torch_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_torch_rc EQUAL 0)
    string(REPLACE "\n" ";" _torch_out "${_torch_out}")
    list(GET _torch_out 0 HPCTRAIN_TORCH_VERSION)
    list(GET _torch_out 1 HPCTRAIN_TORCH_PREFIX)
    list(LENGTH _torch_out _n)
    if(_n GREATER 2)
      list(GET _torch_out 2 HPCTRAIN_TORCH_CUDA)
    endif()
    # The real path: .venv is a link into the shared venv, and executables' RUNPATH must not
    # point into a checkout that other nodes (with their own /tmp, say) cannot see.
    file(REAL_PATH "${HPCTRAIN_TORCH_PREFIX}" HPCTRAIN_TORCH_PREFIX)
    list(APPEND CMAKE_PREFIX_PATH "${HPCTRAIN_TORCH_PREFIX}")
  else()
    message(WARNING "${HPCTRAIN_PYTHON} cannot import torch: ${_torch_err}")
  endif()
endif()

include(CheckLanguage)
set(HPCTRAIN_CUDA_ENABLED OFF)
if(NOT HPCTRAIN_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER AND HPCTRAIN_TORCH_CUDA)
    set(HPCTRAIN_CUDA_ENABLED ON)
  elseif(HPCTRAIN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "HPCTRAIN_CUDA=ON needs a CUDA toolkit (nvcc: '${CMAKE_CUDA_COMPILER}') "
                        "and a CUDA-enabled libtorch (torch.version.cuda: '${HPCTRAIN_TORCH_CUDA}')")
  endif()
endif()
