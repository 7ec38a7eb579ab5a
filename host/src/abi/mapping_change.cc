// See mapping_change.h.
#include "abi/mapping_change.h"

namespace csi_proxy::host {

std::mutex& MappingChangeMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace csi_proxy::host
