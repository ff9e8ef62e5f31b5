# Script mode: writes OUT, a C++ file defining hpctrain::embedded::NAME() with IN's bytes.
file(READ "${IN}" content HEX)
string(LENGTH "${content}" hex_len)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${content}")
math(EXPR len "${hex_len} / 2")
file(WRITE "${OUT}"
  "// Generated from ${IN}; do not edit.\n#include <string_view>\n"
  "namespace hpctrain::embedded {\nstatic const char k${NAME}[] = {${bytes} '\\0'};\n"
  "std::string_view ${NAME}() { return {k${NAME}, ${len}}; }\n}  // namespace hpctrain::embedded\n")
