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
