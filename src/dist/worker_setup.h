#pragma once
// A non-zero rank's half of the setup: the setup message's text form, and the slice, forward
// pass and KV cache a rank builds from it. Independent of the transport.
// Thread-safety: free functions; a Worker belongs to one thread.
#include <memory>
#include <optional>
#include <string>

#include "dist/tensor_group.h"
#include "model/decoder_forward.h"

namespace vela::dist {

// Bytes of the status text each rank answers a setup with (empty: loaded).
inline constexpr size_t kStatusBytes = 512;

std::string encode_setup(const ShardSetup& setup);
Result<ShardSetup> decode_setup(const std::string& text);

struct Worker {
  std::shared_ptr<const Model> model;  // this rank's slice
  DecoderForward forward;
  KvCache cache;
};

// Loads this rank's slice as the setup text says; nullopt with `status` naming the problem.
std::unique_ptr<Worker> load_worker(const std::string& setup_text,
                                    const std::shared_ptr<TensorParallel>& group,
                                    std::string& status);

}  // namespace vela::dist
