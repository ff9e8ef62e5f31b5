// What a call throws, as text a test can search: the runtime's errors (common/error.hpp) carry a
// "[rank r/N host] file:line: " prefix in what(), and message() without it.
// Thread safety: test-only; the functions only call `f`.
#pragma once

#include <functional>
#include <string>

#include "common/error.hpp"

namespace hpctrain::test {

// what() of the E (an rt::Error by default) that f throws, prefix included; "(no error)" when f
// returns.
template <class E = rt::Error>
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

// message() of the E that f throws, without the prefix; "" when f returns.
template <class E = rt::Error>
std::string bare_message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.message();
  }
  return "";
}

}  // namespace hpctrain::test
