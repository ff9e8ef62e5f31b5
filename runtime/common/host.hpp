// This machine's host name, as gethostname(2) gives it: what ranks register in the rendezvous
// store and what error prefixes show.
// Thread safety: reentrant.
#pragma once

#include <string>

namespace hpctrain {

// The host name, or "?" if the system cannot say.
std::string host_name();

}  // namespace hpctrain
