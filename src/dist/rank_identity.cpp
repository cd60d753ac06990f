#include "dist/rank_identity.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "io/gguf.h"
#include "kernels/cpu_features.h"
#include "util/build_info.h"

namespace vela::dist {

namespace {

uint64_t fnv1a64(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

}  // namespace

Result<RankIdentity> identify_rank(const std::string& model_path) {
  auto file = GgufFile::open(model_path);
  if (!file) return make_error("'" + model_path + "': " + file.message());
  return identify_rank(*file);
}

RankIdentity identify_rank(const GgufFile& file) {
  RankIdentity id;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) id.host = host;
  id.build = vela_build_id();
  id.kernels = kernel_isa_name(selected_kernel_isa());
  id.model_bytes = file.file_size();
  id.model_index_hash = fnv1a64(file.header_bytes());
  return id;
}

std::string identity_mismatch(const RankIdentity& expected, const RankIdentity& mine) {
  if (mine.build != expected.build)
    return "runs vela " + mine.build + ", rank 0 runs vela " + expected.build +
           ": every rank needs the same build";
  if (mine.model_bytes != expected.model_bytes)
    return "its model file has " + std::to_string(mine.model_bytes) + " bytes, rank 0's has " +
           std::to_string(expected.model_bytes) + ": every host needs the same file at the path";
  if (mine.model_index_hash != expected.model_index_hash)
    return "its model file's header and tensor index differ from rank 0's (hash " +
           hex(mine.model_index_hash) + " against " + hex(expected.model_index_hash) +
           "): every host needs the same file at the path";
  return {};
}

nlohmann::json identity_to_json(const RankIdentity& id) {
  return {{"host", id.host},
          {"build", id.build},
          {"kernels", id.kernels},
          {"model_bytes", id.model_bytes},
          {"model_index_hash", hex(id.model_index_hash)}};
}

Result<RankIdentity> identity_from_json(const nlohmann::json& j) {
  try {
    RankIdentity id;
    id.host = j.at("host").get<std::string>();
    id.build = j.at("build").get<std::string>();
    id.kernels = j.at("kernels").get<std::string>();
    id.model_bytes = j.at("model_bytes").get<uint64_t>();
    id.model_index_hash = std::stoull(j.at("model_index_hash").get<std::string>(), nullptr, 16);
    return id;
  } catch (const std::exception& e) {
    return make_error(std::string("malformed rank identity: ") + e.what());
  }
}

}  // namespace vela::dist
