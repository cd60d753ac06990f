// TensorParallel over MPI_COMM_WORLD. Every message from rank 0 is a broadcast of a two-word
// header (command, payload bytes) and then the payload. The other ranks wait for a header with a
// non-blocking broadcast polled with a growing sleep, so an idle worker leaves its cores to the
// engine instead of spinning in MPI's progress loop.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "dist/tensor_group.h"
#include "dist/worker_setup.h"

namespace vela::dist {

namespace {

enum Command : int64_t { kSetup = 1, kBatch = 2, kClose = 3 };

class MpiTensorGroup : public TensorParallel {
 public:
  MpiTensorGroup(int32_t rank, int32_t size) : rank_(rank), size_(size) {}
  ~MpiTensorGroup() override {
    if (rank_ == 0 && !closed_) close();
    MPI_Finalize();
  }

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  void mark_closed() { closed_ = true; }
  void mark_open() { closed_ = false; }

  void send(Command command, const void* data, int64_t bytes) {
    int64_t header[2] = {command, bytes};
    // Non-blocking like the receivers' (blocking and non-blocking collectives do not match).
    MPI_Request request;
    MPI_Ibcast(header, 2, MPI_INT64_T, 0, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    if (bytes > 0) MPI_Bcast(const_cast<void*>(data), int(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
  }
  // The next command and its payload (into payload_).
  Command receive() {
    int64_t header[2] = {0, 0};
    MPI_Request request;
    MPI_Ibcast(header, 2, MPI_INT64_T, 0, MPI_COMM_WORLD, &request);
    int done = 0;
    auto sleep = std::chrono::microseconds(0);
    for (;;) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) break;
      if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
      sleep = std::min(std::chrono::microseconds(1000), sleep * 2 + std::chrono::microseconds(1));
    }
    payload_.resize(size_t(header[1]));
    if (header[1] > 0) MPI_Bcast(payload_.data(), int(header[1]), MPI_BYTE, 0, MPI_COMM_WORLD);
    return Command(header[0]);
  }
  const std::vector<char>& payload() const { return payload_; }

  void send_batch(const ForwardBatch& batch) override {
    message_.encode(batch);
    send(kBatch, message_.words().data(), int64_t(message_.words().size() * sizeof(int32_t)));
  }
  std::optional<ForwardBatch> receive_batch() override {
    for (;;) {
      const Command c = receive();
      if (c == kClose) return std::nullopt;
      if (c != kBatch) continue;  // a stray setup: not this rank's business now
      words_.resize(payload_.size() / sizeof(int32_t));
      std::copy_n(payload_.data(), words_.size() * sizeof(int32_t),
                  reinterpret_cast<char*>(words_.data()));
      auto b = BatchMessage::decode(words_);
      if (!b) {
        std::fprintf(stderr, "vela: tensor-parallel rank %d: %s\n", rank_, b.message().c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      return *b;
    }
  }
  void close() override {
    closed_ = true;
    send(kClose, nullptr, 0);
  }

  void all_reduce_sum(std::span<float> x) override {
    parts_.resize(x.size() * size_t(size_));
    MPI_Allgather(x.data(), int(x.size()), MPI_FLOAT, parts_.data(), int(x.size()), MPI_FLOAT,
                  MPI_COMM_WORLD);
    // Added in rank order on every rank: the same bits everywhere, whatever MPI's algorithm.
    std::copy_n(parts_.data(), x.size(), x.data());
    for (int32_t r = 1; r < size_; ++r) {
      const float* part = parts_.data() + size_t(r) * x.size();
      for (size_t i = 0; i < x.size(); ++i) x[i] += part[i];
    }
  }
  void gather(std::span<const float> local, std::span<float> all, std::span<const int64_t> counts,
              bool everyone) override {
    counts_.assign(size_t(size_), 0);
    displs_.assign(size_t(size_), 0);
    if (everyone || rank_ == 0)
      for (int32_t r = 0; r < size_; ++r) {
        counts_[size_t(r)] = int(counts[size_t(r)]);
        if (r > 0) displs_[size_t(r)] = displs_[size_t(r) - 1] + counts_[size_t(r) - 1];
      }
    if (everyone) {
      MPI_Allgatherv(local.data(), int(local.size()), MPI_FLOAT, all.data(), counts_.data(),
                     displs_.data(), MPI_FLOAT, MPI_COMM_WORLD);
    } else {
      MPI_Gatherv(local.data(), int(local.size()), MPI_FLOAT, all.data(), counts_.data(),
                  displs_.data(), MPI_FLOAT, 0, MPI_COMM_WORLD);
    }
  }

 private:
  int32_t rank_, size_;
  bool closed_ = false;
  BatchMessage message_;
  std::vector<int32_t> words_;
  std::vector<char> payload_;
  std::vector<float> parts_;
  std::vector<int> counts_, displs_;
};

std::weak_ptr<MpiTensorGroup> g_group;

}  // namespace

bool available() {
  return true;
}

Result<std::shared_ptr<TensorParallel>> join(int32_t size) {
  if (auto group = g_group.lock()) {
    if (group->size() != size)
      return make_error("this process's tensor-parallel group has " +
                        std::to_string(group->size()) + " ranks, not " + std::to_string(size));
    return std::shared_ptr<TensorParallel>(group);
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return make_error("MPI was initialised and finalised already in this process");
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMIX_RANK") && !std::getenv("PMI_RANK"))
    return make_error("--tensor-parallel-size " + std::to_string(size) + " needs " +
                      std::to_string(size) + " MPI ranks: run it as mpirun -np " +
                      std::to_string(size) + " vela ...");
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  auto group = std::make_shared<MpiTensorGroup>(rank, world);
  group->mark_closed();  // until the checks pass: nothing to tell the other ranks
  if (provided < MPI_THREAD_SERIALIZED)
    return make_error(
        "this MPI library does not let the engine thread call it "
        "(MPI_THREAD_SERIALIZED)");
  if (world != size)
    return make_error("--tensor-parallel-size " + std::to_string(size) + " but mpirun started " +
                      std::to_string(world) + " ranks");
  group->mark_open();
  g_group = group;
  return std::shared_ptr<TensorParallel>(group);
}

Status start_workers(TensorParallel& g, const ShardSetup& setup) {
  auto& group = static_cast<MpiTensorGroup&>(g);
  const std::string text = encode_setup(setup);
  group.send(kSetup, text.data(), int64_t(text.size()));
  // Each rank answers with a fixed-size status text: empty when its slice is loaded.
  std::vector<char> replies(kStatusBytes * size_t(group.size()));
  std::vector<char> mine(kStatusBytes, '\0');
  MPI_Gather(mine.data(), int(kStatusBytes), MPI_CHAR, replies.data(), int(kStatusBytes), MPI_CHAR,
             0, MPI_COMM_WORLD);
  for (int32_t r = 1; r < group.size(); ++r) {
    const char* reply = replies.data() + kStatusBytes * size_t(r);
    if (reply[0] != '\0')
      return make_error("tensor-parallel rank " + std::to_string(r) + ": " +
                        std::string(reply, strnlen(reply, kStatusBytes)));
  }
  return {};
}

int serve_as_worker(const std::shared_ptr<TensorParallel>& g) {
  auto& group = static_cast<MpiTensorGroup&>(*g);
  for (;;) {
    const Command c = group.receive();
    if (c == kClose) return 0;
    if (c != kSetup) continue;
    std::string status;
    auto worker =
        load_worker(std::string(group.payload().begin(), group.payload().end()), g, status);
    std::vector<char> reply(kStatusBytes, '\0');
    std::copy_n(status.data(), std::min(status.size(), kStatusBytes - 1), reply.data());
    MPI_Gather(reply.data(), int(kStatusBytes), MPI_CHAR, nullptr, 0, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (!worker) {  // rank 0 reports the error and closes the group
      while (group.receive() != kClose) {
      }
      return 1;
    }
    if (auto st = run_tensor_parallel_worker(worker->forward, worker->cache, *g); !st) {
      std::fprintf(stderr, "vela: %s\n", st.message().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return 0;
  }
}

}  // namespace vela::dist
