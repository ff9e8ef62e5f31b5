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

# NCCL. c10d's ProcessGroupNCCL.hpp includes <nccl.h>, and the worker runs with the libnccl the
# torch wheel loads (its nvidia-nccl-* package, through libtorch_cuda.so's RPATH). Headers of
# another NCCL (the CUDA toolkit's, a site module's, Debian's libnccl-dev) compile fine and then
# disagree with that library on struct layouts, enums and feature macros, so the build takes the
# wheel's headers, first on the include path (HPCTRAIN_NCCL_INCLUDE_DIR, put before everything
# else on hpctrain_torch by runtime/CMakeLists.txt), and configure stops when the nccl.h it would
# use is not the version torch reports (torch.cuda.nccl.version(), no GPU needed).
set(HPCTRAIN_NCCL_VERSION "")
set(HPCTRAIN_NCCL_INCLUDE_DIR "" CACHE PATH
    "Directory of the nccl.h to build with (default: the torch wheel's nvidia-nccl package)")
# Before this was an override, runtime/dist searched the CUDA toolkit with find_path and cached
# what it found ("Path to a file."): that stale entry must not pass for a choice of the user's.
get_property(_nccl_help CACHE HPCTRAIN_NCCL_INCLUDE_DIR PROPERTY HELPSTRING)
if(_nccl_help STREQUAL "Path to a file.")
  unset(HPCTRAIN_NCCL_INCLUDE_DIR CACHE)
  set(HPCTRAIN_NCCL_INCLUDE_DIR "" CACHE PATH
      "Directory of the nccl.h to build with (default: the torch wheel's nvidia-nccl package)")
endif()
if(HPCTRAIN_CUDA_ENABLED)
  execute_process(
    COMMAND "${HPCTRAIN_PYTHON}" -c [=[
import importlib.metadata as md
import torch
print(".".join(str(x) for x in torch.cuda.nccl.version()[:3]))
for dist in md.distributions():
    if (dist.metadata["Name"] or "").lower().startswith("nvidia-nccl"):
        for f in dist.files or []:
            if f.name == "nccl.h" and f.parent.name == "include":
                print(dist.metadata["Name"] + " " + dist.version)
                print(dist.locate_file(f).parent)
                raise SystemExit(0)
]=]
    OUTPUT_VARIABLE _nccl_out ERROR_VARIABLE _nccl_err RESULT_VARIABLE _nccl_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _nccl_rc EQUAL 0)
    message(FATAL_ERROR "${HPCTRAIN_PYTHON} cannot tell torch's NCCL version "
                        "(torch.cuda.nccl.version(), a torch built without NCCL?): ${_nccl_err}")
  endif()
  string(REPLACE "\n" ";" _nccl_out "${_nccl_out}")
  list(GET _nccl_out 0 _torch_nccl)
  set(_wheel_nccl "")
  set(_wheel_nccl_dir "")
  list(LENGTH _nccl_out _n)
  if(_n GREATER 2)
    list(GET _nccl_out 1 _wheel_nccl)
    list(GET _nccl_out 2 _wheel_nccl_dir)
    file(REAL_PATH "${_wheel_nccl_dir}" _wheel_nccl_dir)
  endif()

  if(HPCTRAIN_NCCL_INCLUDE_DIR)
    set(_nccl_dir "${HPCTRAIN_NCCL_INCLUDE_DIR}")
    set(_nccl_from "HPCTRAIN_NCCL_INCLUDE_DIR")
  elseif(_wheel_nccl_dir)
    set(_nccl_dir "${_wheel_nccl_dir}")
    set(_nccl_from "the wheel's ${_wheel_nccl}")
  else()
    # A torch without an nvidia-nccl package (a site build, NCCL linked in): the toolkit's header,
    # accepted only at torch's version (below).
    get_filename_component(_nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    find_path(_nccl_dir nccl.h NO_CACHE NO_DEFAULT_PATH
              PATHS "${_nvcc_dir}/../include" "${_nvcc_dir}/../targets/x86_64-linux/include"
                    /usr/local/cuda/include /usr/include)
    set(_nccl_from "no nvidia-nccl package beside torch; found by searching the CUDA toolkit")
  endif()
  if(NOT _nccl_dir OR NOT EXISTS "${_nccl_dir}/nccl.h")
    message(FATAL_ERROR "no nccl.h in '${_nccl_dir}' (${_nccl_from}); torch "
                        "${HPCTRAIN_TORCH_VERSION} (${HPCTRAIN_PYTHON}) uses NCCL ${_torch_nccl}.\n"
                        "HINT: set -DHPCTRAIN_NCCL_INCLUDE_DIR=DIR to the include directory of "
                        "NCCL ${_torch_nccl}, or install the torch wheel's nvidia-nccl package")
  endif()
  file(REAL_PATH "${_nccl_dir}" _nccl_dir)
  file(STRINGS "${_nccl_dir}/nccl.h" _nccl_defines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  set(_hdr_nccl "")
  foreach(part MAJOR MINOR PATCH)
    if(_nccl_defines MATCHES "#define NCCL_${part} +([0-9]+)")
      list(APPEND _hdr_nccl "${CMAKE_MATCH_1}")
    else()
      list(APPEND _hdr_nccl "?")
    endif()
  endforeach()
  list(JOIN _hdr_nccl "." _hdr_nccl)
  if(NOT _hdr_nccl STREQUAL _torch_nccl)
    if(_wheel_nccl_dir)
      string(CONCAT _hint "leave HPCTRAIN_NCCL_INCLUDE_DIR empty to use the wheel's headers "
                          "(${_wheel_nccl}: ${_wheel_nccl_dir})")
    else()
      string(CONCAT _hint "set -DHPCTRAIN_NCCL_INCLUDE_DIR=DIR to the include directory of NCCL "
                          "${_torch_nccl}")
    endif()
    message(FATAL_ERROR
      "NCCL version mismatch: ${_nccl_dir}/nccl.h is NCCL ${_hdr_nccl} (${_nccl_from}), but "
      "torch ${HPCTRAIN_TORCH_VERSION} (${HPCTRAIN_PYTHON}, torch.cuda.nccl.version()) runs with "
      "NCCL ${_torch_nccl}. c10d's ProcessGroupNCCL compiled against one and run with the other "
      "is undefined behaviour.\nHINT: ${_hint}")
  endif()
  set(HPCTRAIN_NCCL_VERSION "${_hdr_nccl}")
  # A normal variable over the cache entry: what the build uses (and what runtime/dist's
  # find_path of the same name then takes without searching).
  set(HPCTRAIN_NCCL_INCLUDE_DIR "${_nccl_dir}")
endif()

# cuDNN, for the fused batch norm's kernels (runtime/model/fused_bn_cudnn.cpp): the torch wheel's
# nvidia-cudnn package, whose libcudnn.so.9 libtorch_cuda loads, and its cudnn.h. Without one (a
# site build of torch) the fused batch norm runs its ATen reference on the GPU too.
set(HPCTRAIN_CUDNN_INCLUDE_DIR "")
set(HPCTRAIN_CUDNN_LIBRARY "")
if(HPCTRAIN_CUDA_ENABLED)
  execute_process(
    COMMAND "${HPCTRAIN_PYTHON}" -c [=[
import importlib.metadata as md
for dist in md.distributions():
    if (dist.metadata["Name"] or "").lower().startswith("nvidia-cudnn"):
        found = {}
        for f in dist.files or []:
            if f.name == "cudnn.h" and f.parent.name == "include":
                found["include"] = dist.locate_file(f).parent
            if f.name.startswith("libcudnn.so.") and f.parent.name == "lib":
                found["lib"] = dist.locate_file(f)
        if len(found) == 2:
            print(found["include"])
            print(found["lib"])
            raise SystemExit(0)
]=]
    OUTPUT_VARIABLE _cudnn_out RESULT_VARIABLE _cudnn_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE "\n" ";" _cudnn_out "${_cudnn_out}")
  list(LENGTH _cudnn_out _n)
  if(_cudnn_rc EQUAL 0 AND _n EQUAL 2)
    list(GET _cudnn_out 0 HPCTRAIN_CUDNN_INCLUDE_DIR)
    list(GET _cudnn_out 1 HPCTRAIN_CUDNN_LIBRARY)
    message(STATUS "cuDNN for the fused batch norm: ${HPCTRAIN_CUDNN_LIBRARY}")
  else()
    message(STATUS "no nvidia-cudnn package beside torch: the fused batch norm runs its ATen "
                   "reference on the GPU too")
  endif()
endif()

# hpctrain_find_torch(): find_package(Torch) without the two warnings the wheel's config prints on
# every configure that a user cannot act on (a macro: the imported targets land in the caller's
# directory).
# - "library kineto not found": the wheel has no separate libkineto (the profiler is linked into
#   libtorch_cpu); naming libtorch_cpu, which TORCH_LIBRARIES has anyway, is what it looks for.
# - "pytorch is not compatible with CMAKE_CUDA_ARCHITECTURES": its enable_language(CUDA) sets the
#   variable from nvcc's default under policy CMP0104, then warns that it ignores it (it takes
#   TORCH_CUDA_ARCH_LIST) and sets it OFF. Under the policy's old behaviour it is never set. No
#   source of ours is CUDA, so the value mattered to nothing.
macro(hpctrain_find_torch)
  get_filename_component(_torch_lib_dir "${HPCTRAIN_TORCH_PREFIX}/../../lib" ABSOLUTE)
  if(NOT kineto_LIBRARY AND EXISTS "${_torch_lib_dir}/libtorch_cpu.so"
     AND NOT EXISTS "${_torch_lib_dir}/libkineto.a")
    set(kineto_LIBRARY "${_torch_lib_dir}/libtorch_cpu.so" CACHE FILEPATH
        "libtorch_cpu, which holds the wheel's kineto (cmake/torch.cmake)" FORCE)
  endif()
  cmake_policy(PUSH)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    cmake_policy(SET CMP0104 OLD)
  endif()
  find_package(Torch REQUIRED)
  cmake_policy(POP)
endmacro()
