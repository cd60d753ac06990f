#pragma once
// What a rank of a parallel job must share with rank 0 for its slice to compute the same model:
// the model file (size, and a hash of its GGUF header and tensor index: the metadata, tensor
// names, shapes, types and offsets) and the vela build; and what it may differ in and is
// reported: its host and kernel level. Free functions over a plain value; no shared state.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "util/result.h"

namespace vela::dist {

struct RankIdentity {
  std::string host;               // gethostname()
  std::string build;              // vela_build_id()
  std::string kernels;            // the kernel level in use, e.g. "avx512"
  uint64_t model_bytes = 0;       // the model file's size
  uint64_t model_index_hash = 0;  // FNV-1a 64 of the bytes before the tensor data
};

// This process's identity for the model file at `path` (opened and its header read).
Result<RankIdentity> identify_rank(const std::string& model_path);
// The same for a file already open.
RankIdentity identify_rank(const GgufFile& file);

// Why a rank with identity `mine` cannot join rank 0's job (`expected`): the build or the
// model file differs, said with both values. Empty when it can.
std::string identity_mismatch(const RankIdentity& expected, const RankIdentity& mine);

nlohmann::json identity_to_json(const RankIdentity& identity);
// A malformed identity is an error (it comes from another process).
Result<RankIdentity> identity_from_json(const nlohmann::json& j);

}  // namespace vela::dist
