// dist/kv_store.hpp over a c10d::Store connection (the worker's TCPStore clone).
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <memory>

#include "dist/kv_store.hpp"

namespace c10d {
class Store;
}

namespace hpctrain::dist {

std::unique_ptr<KvStore> c10d_kv_store(c10::intrusive_ptr<c10d::Store> store);

}  // namespace hpctrain::dist
