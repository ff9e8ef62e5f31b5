# One interface target carries the project's warning and sanitizer flags; every target links it.
add_library(hpctrain_options INTERFACE)
target_compile_options(hpctrain_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wunused -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough)
if(HPCTRAIN_SANITIZE)
  target_compile_options(hpctrain_options INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(hpctrain_options INTERFACE -fsanitize=address,undefined)
endif()
# ThreadSanitizer cannot share a build with AddressSanitizer; -O1 keeps its runs fast enough and
# its stacks readable. Only the torch-free code is built this way (libtorch is not instrumented).
if(HPCTRAIN_TSAN)
  if(HPCTRAIN_SANITIZE)
    message(FATAL_ERROR "HPCTRAIN_TSAN and HPCTRAIN_SANITIZE exclude each other: use two builds")
  endif()
  target_compile_options(hpctrain_options INTERFACE -fsanitize=thread -O1 -g -fno-omit-frame-pointer)
  target_link_options(hpctrain_options INTERFACE -fsanitize=thread)
endif()
