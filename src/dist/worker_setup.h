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

// Bytes of the reply each rank answers a setup with: a JSON object {"identity": {...},
// "error": "..."} (no error: its slice is loaded), NUL-padded.
inline constexpr size_t kStatusBytes = 2048;

std::string encode_setup(const ShardSetup& setup);
Result<ShardSetup> decode_setup(const std::string& text);

struct Worker {
  std::shared_ptr<const Model> model;  // this rank's slice
  DecoderForward forward;
  KvCache cache;
};

// Loads this rank's slice as the setup text says, after checking that this rank's build and
// model file are rank 0's; `reply` is what the rank answers (null when it has an error).
std::unique_ptr<Worker> load_worker(const std::string& setup_text,
                                    const std::shared_ptr<TensorParallel>& group,
                                    std::string& reply);
// Rank 0's reading of rank `rank`'s reply: an error naming the rank, its host and the problem;
// `note` gets a line for stderr when the rank runs another kernel level.
Status check_worker_reply(int32_t rank, const std::string& reply, const RankIdentity& expected,
                          std::string& note);

}  // namespace vela::dist
