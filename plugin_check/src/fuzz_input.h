// The requests the fuzz check sends a method: input N of a method is a function of the seed, the method's path and
// N alone, so a failure found in one run is input N again in the next (--seed, --input).
#pragma once

#include <google/protobuf/descriptor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace csi_proxy::plugin_check {

struct FuzzInput {
  std::string bytes;
  std::string kind;  // "empty", "random bytes", "valid", "truncated", "oversized", "malformed wire", "mutated"
};

class FuzzInputs {
 public:
  // `request_type`: the method's request message when the library described its services (null otherwise: then
  // "valid" inputs are well-formed protobuf of no particular message). `sample`: a request the configuration gave
  // (may be empty). `path_roots`: directories whose paths strings may name, so that path checks are passed at times.
  // No input is longer than `max_bytes`, as the host hands no larger request to a library.
  FuzzInputs(uint64_t seed, const std::string& method, const google::protobuf::Descriptor* request_type,
             std::string sample, std::vector<std::string> path_roots, size_t max_bytes);
  FuzzInput Make(uint64_t index) const;

 private:
  uint64_t base_;
  const google::protobuf::Descriptor* request_type_;
  std::string sample_;
  std::vector<std::string> path_roots_;
  size_t max_bytes_;
};

}  // namespace csi_proxy::plugin_check
