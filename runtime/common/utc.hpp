// The time now in UTC as ISO 8601 to the second ("2026-11-23T09:06:01Z"), the form every record
// hpctrain writes uses (submissions, checkpoint manifests).
// Thread safety: reentrant.
#pragma once

#include <string>

namespace hpctrain {

std::string utc_now();

}  // namespace hpctrain
