// TensorParallel over MPI: the world of mpirun, or rank 0 merged with the workers it spawned.
// World rank w is rank w % T of pipeline stage w / T (T ranks a stage); a stage's collectives
// run on a communicator of its own, hidden states go point to point. Every message from rank 0
// is a broadcast of a two-word header (command, payload bytes) and then the payload. Every call is
// non-blocking, waited for with a deadline inside a pass (the watchdog); the other ranks wait for
// the next command polling with a growing sleep, so an idle worker leaves its cores to the engine
// instead of spinning in MPI's progress loop. A duplicate of the communicator carries liveness
// pings: every rank keeps a receive posted on it and answers while it waits, so a rank whose
// deadline passes can name the ranks that no longer answer.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "dist/tensor_group.h"
#include "dist/worker_setup.h"
#include "kernels/cpu_features.h"

namespace vela::dist {

namespace {

// kReport: every rank sends its TensorParallelTraffic to rank 0 (gather_traffic).
enum Command : int64_t { kSetup = 1, kBatch = 2, kClose = 3, kReport = 4 };

std::atomic<bool> g_failed{false};
// How long a failed rank keeps running before it aborts the job: time for a load balancer's
// health check to see /health answer 503.
constexpr auto kFailureNoticeSeconds = std::chrono::seconds(3);
// How long a rank whose deadline passed waits for the others to answer its ping.
constexpr auto kPingAnswerSeconds = std::chrono::seconds(2);

// Adds the wall time of a scope to a total.
class ScopedSeconds {
 public:
  explicit ScopedSeconds(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~ScopedSeconds() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

class MpiTensorGroup : public TensorParallel {
 public:
  // comm: the group's communicator (the world under mpirun, or the spawner's merged with its
  // spawned workers); local_ranks: ranks sharing this host's cores; sizes: the layout, on world
  // rank 0 (the others learn it from rank 0).
  MpiTensorGroup(MPI_Comm comm, int32_t local_ranks, ParallelSizes sizes)
      : comm_(comm), local_ranks_(local_ranks) {
    MPI_Comm_rank(comm_, &world_rank_);
    MPI_Comm_size(comm_, &world_size_);
    if (const char* v = std::getenv("VELA_TENSOR_PARALLEL_TIMEOUT")) {
      const double seconds = std::atof(v);
      if (seconds > 0) watchdog_ = std::chrono::duration<double>(seconds);
    }
    int32_t layout[2] = {sizes.tensor, sizes.pipeline};
    MPI_Request request;
    MPI_Ibcast(layout, 2, MPI_INT32_T, 0, comm_, &request);
    finish(request, "joining the group", false);
    size_ = layout[0];
    n_stages_ = layout[1];
    rank_ = world_rank_ % size_;
    stage_ = world_rank_ / size_;
    MPI_Comm_split(comm_, stage_, rank_, &stage_comm_);
    // Pings and their answers: errors there are answered (a dead peer), never fatal.
    MPI_Comm_dup(comm_, &ping_comm_);
    MPI_Comm_set_errhandler(ping_comm_, MPI_ERRORS_RETURN);
    post_ping_receive();
  }
  int32_t local_ranks() const { return local_ranks_; }
  MPI_Comm comm() const { return comm_; }
  int32_t world_size() const { return world_size_; }
  ~MpiTensorGroup() override {
    if (world_rank_ == 0 && !closed_) close();
    MPI_Cancel(&ping_receive_);
    MPI_Wait(&ping_receive_, MPI_STATUS_IGNORE);
    MPI_Comm_free(&ping_comm_);
    MPI_Comm_free(&stage_comm_);
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
    MPI_Finalize();
  }

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  int32_t stage() const override { return stage_; }
  int32_t n_stages() const override { return n_stages_; }

  void send(Command command, const void* data, int64_t bytes) {
    finish_batches(0);  // commands go out after every batch, in order
    ScopedSeconds timed(traffic_.seconds);
    traffic_.bytes_sent += uint64_t(16 + bytes) * uint64_t(world_size_ - 1);
    int64_t header[2] = {command, bytes};
    MPI_Request request;
    MPI_Ibcast(header, 2, MPI_INT64_T, 0, comm_, &request);
    finish(request, "sending a command", true);
    if (bytes > 0) {
      MPI_Ibcast(const_cast<void*>(data), int(bytes), MPI_BYTE, 0, comm_, &request);
      finish(request, "sending a command", true);
    }
  }
  // The next command and its payload (into payload_).
  Command receive() {
    int64_t header[2] = {0, 0};
    MPI_Request request;
    MPI_Ibcast(header, 2, MPI_INT64_T, 0, comm_, &request);
    finish(request, "waiting for rank 0", false);  // idle between requests: no deadline
    // A setup starts another engine: this rank's figures count that engine's passes.
    if (header[0] == kSetup) traffic_ = {};
    payload_.resize(size_t(header[1]));
    if (header[1] > 0) {
      MPI_Ibcast(payload_.data(), int(header[1]), MPI_BYTE, 0, comm_, &request);
      finish(request, "receiving a command", true);
    }
    return Command(header[0]);
  }
  const std::vector<char>& payload() const { return payload_; }
  TensorParallelTraffic traffic() const override { return traffic_; }
  // The command that ended the last receive_batch.
  Command last_command() const { return last_; }

  void send_batch(const ForwardBatch& batch) override {
    ScopedSeconds timed(traffic_.seconds);
    // A finished entry's buffers are reused: no allocation per pass once the pipeline is full.
    if (spare_batches_.empty()) spare_batches_.emplace_back();
    batches_.splice(batches_.end(), spare_batches_, spare_batches_.begin());
    PostedBatch& posted = batches_.back();
    posted.message.encode(batch);
    const std::vector<int32_t>& words = posted.message.words();
    const int64_t bytes = int64_t(words.size() * sizeof(int32_t));
    traffic_.bytes_sent += uint64_t(16 + bytes) * uint64_t(world_size_ - 1);
    posted.header[0] = kBatch;
    posted.header[1] = bytes;
    MPI_Ibcast(posted.header, 2, MPI_INT64_T, 0, comm_, &posted.requests[0]);
    MPI_Ibcast(const_cast<int32_t*>(words.data()), int(bytes), MPI_BYTE, 0, comm_,
               &posted.requests[1]);
  }
  void finish_batches(size_t keep) override {
    ScopedSeconds timed(traffic_.seconds);
    while (batches_.size() > keep) {
      for (MPI_Request& request : batches_.front().requests)
        finish(request, "sending a batch", true);
      spare_batches_.splice(spare_batches_.end(), batches_, batches_.begin());
    }
  }
  std::optional<ForwardBatch> receive_batch() override {
    for (;;) {
      last_ = receive();
      // A close ends the passes; so does a new setup (rank 0 builds another engine).
      if (last_ == kClose || last_ == kSetup) return std::nullopt;
      if (last_ == kReport) {
        report_traffic(nullptr);
        continue;
      }
      if (last_ != kBatch) continue;
      words_.resize(payload_.size() / sizeof(int32_t));
      std::copy_n(payload_.data(), words_.size() * sizeof(int32_t),
                  reinterpret_cast<char*>(words_.data()));
      auto b = received_.decode(words_);
      if (!b) {
        std::fprintf(stderr, "vela: tensor-parallel rank %d: %s\n", world_rank_,
                     b.message().c_str());
        MPI_Abort(comm_, 1);
      }
      return *b;
    }
  }
  void close() override {
    closed_ = true;
    send(kClose, nullptr, 0);
  }
  std::vector<TensorParallelTraffic> gather_traffic() override {
    send(kReport, nullptr, 0);
    std::vector<TensorParallelTraffic> all(static_cast<size_t>(world_size_));
    report_traffic(all.data());
    return all;
  }

  void all_reduce_sum(std::span<float> x) override {
    ScopedSeconds timed(traffic_.seconds);
    traffic_.bytes_sent += x.size_bytes() * uint64_t(size_ - 1);
    parts_.resize(x.size() * size_t(size_));
    MPI_Request request;
    MPI_Iallgather(x.data(), int(x.size()), MPI_FLOAT, parts_.data(), int(x.size()), MPI_FLOAT,
                   stage_comm_, &request);
    finish(request, "an all-reduce", true);
    // Added in rank order on every rank: the same bits everywhere, whatever MPI's algorithm.
    std::copy_n(parts_.data(), x.size(), x.data());
    for (int32_t r = 1; r < size_; ++r) {
      const float* part = parts_.data() + size_t(r) * x.size();
      for (size_t i = 0; i < x.size(); ++i) x[i] += part[i];
    }
  }
  void gather(std::span<const float> local, std::span<float> all, std::span<const int64_t> counts,
              bool everyone) override {
    ScopedSeconds timed(traffic_.seconds);
    if (everyone || rank_ != 0)
      traffic_.bytes_sent += local.size_bytes() * uint64_t(everyone ? size_ - 1 : 1);
    counts_.assign(size_t(size_), 0);
    displs_.assign(size_t(size_), 0);
    if (everyone || rank_ == 0)
      for (int32_t r = 0; r < size_; ++r) {
        counts_[size_t(r)] = int(counts[size_t(r)]);
        if (r > 0) displs_[size_t(r)] = displs_[size_t(r) - 1] + counts_[size_t(r) - 1];
      }
    MPI_Request request;
    if (everyone) {
      MPI_Iallgatherv(local.data(), int(local.size()), MPI_FLOAT, all.data(), counts_.data(),
                      displs_.data(), MPI_FLOAT, stage_comm_, &request);
    } else {
      MPI_Igatherv(local.data(), int(local.size()), MPI_FLOAT, all.data(), counts_.data(),
                   displs_.data(), MPI_FLOAT, 0, stage_comm_, &request);
    }
    finish(request, "a gather", true);
  }

  void send_to(int32_t to, std::span<const float> x) override {
    ScopedSeconds timed(traffic_.seconds);
    traffic_.bytes_sent += x.size_bytes();
    MPI_Request& request = sends_.emplace_back();
    MPI_Isend(x.data(), int(x.size()), MPI_FLOAT, to, kStageTag, comm_, &request);
  }
  void receive_from(int32_t from, std::span<float> x) override {
    ScopedSeconds timed(traffic_.seconds);
    MPI_Request request;
    MPI_Irecv(x.data(), int(x.size()), MPI_FLOAT, from, kStageTag, comm_, &request);
    finish(request, "receiving from another pipeline stage", true);
  }
  void finish_sends(size_t keep) override {
    ScopedSeconds timed(traffic_.seconds);
    while (sends_.size() > keep) {
      finish(sends_.front(), "sending to another pipeline stage", true);
      sends_.pop_front();
    }
  }

  // Waits for a non-blocking call, polling with a growing sleep (an idle wait leaves the cores
  // to the others) and answering pings once it sleeps. With a deadline, a call the other ranks
  // do not complete within the watchdog's time means one of them died or hangs: this rank pings
  // every other rank, names those that do not answer, and stops the whole job (mpirun then ends
  // every rank with a non-zero exit) instead of waiting for ever.
  void finish(MPI_Request& request, const char* what, bool deadline) {
    const auto start = std::chrono::steady_clock::now();
    const auto max_sleep = std::chrono::microseconds(deadline ? 50 : 1000);
    auto sleep = std::chrono::microseconds(0);
    for (int polls = 0;; ++polls) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) return;
      if (polls < 1000) continue;  // a pass's partners are usually microseconds away
      answer_pings();
      std::this_thread::sleep_for(sleep);
      sleep = std::min(max_sleep, sleep * 2 + std::chrono::microseconds(1));
      if (deadline && std::chrono::steady_clock::now() - start > watchdog_) fail(what);
    }
  }

 private:
  // Rank 0 (all != nullptr, world_size_ entries) gathers every rank's figures; the others send
  // theirs.
  void report_traffic(TensorParallelTraffic* all) {
    static_assert(std::is_trivially_copyable_v<TensorParallelTraffic>);
    constexpr int kBytes = int(sizeof(TensorParallelTraffic));
    TensorParallelTraffic mine = traffic_;
    MPI_Request request;
    MPI_Igather(&mine, kBytes, MPI_BYTE, all, all ? kBytes : 0, MPI_BYTE, 0, comm_, &request);
    finish(request, "gathering the ranks' traffic figures", true);
  }

  void post_ping_receive() {
    MPI_Irecv(&ping_in_, 1, MPI_INT, MPI_ANY_SOURCE, kPingTag, ping_comm_, &ping_receive_);
  }
  // Answers every ping that has arrived (the answer's send completes on its own); nothing
  // while the constructor joins the group, before the ping communicator exists.
  void answer_pings() {
    if (ping_receive_ == MPI_REQUEST_NULL) return;
    for (;;) {
      int arrived = 0;
      MPI_Status status;
      if (MPI_Test(&ping_receive_, &arrived, &status) != MPI_SUCCESS || !arrived) return;
      MPI_Request answer;
      if (MPI_Isend(&ping_out_, 1, MPI_INT, status.MPI_SOURCE, kAnswerTag, ping_comm_, &answer) ==
          MPI_SUCCESS)
        MPI_Request_free(&answer);
      post_ping_receive();
    }
  }
  // The watchdog fired in `what`: pings every other rank, waits a bounded time for their answers
  // (answering the others' pings meanwhile: they may be noticing too), names those that did not
  // answer, and aborts the job.
  [[noreturn]] void fail(const char* what) {
    g_failed = true;  // /health answers 503 from here on
    const size_t n = size_t(world_size_);
    std::vector<MPI_Request> pings(n, MPI_REQUEST_NULL), answers(n, MPI_REQUEST_NULL);
    std::vector<int> in(n, 0);
    std::vector<bool> answered(n, false);
    answered[size_t(world_rank_)] = true;
    for (size_t r = 0; r < n; ++r) {
      if (answered[r]) continue;
      // A rank that cannot even be asked counts as not answering.
      if (MPI_Irecv(&in[r], 1, MPI_INT, int(r), kAnswerTag, ping_comm_, &answers[r]) !=
              MPI_SUCCESS ||
          MPI_Isend(&ping_out_, 1, MPI_INT, int(r), kPingTag, ping_comm_, &pings[r]) != MPI_SUCCESS)
        answers[r] = MPI_REQUEST_NULL;
    }
    const auto asked = std::chrono::steady_clock::now();
    for (;;) {
      bool all = true;
      for (size_t r = 0; r < n; ++r) {
        int done = 0;
        if (!answered[r] && answers[r] != MPI_REQUEST_NULL &&
            MPI_Test(&answers[r], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)
          answered[r] = true;
        all = all && answered[r];
      }
      answer_pings();
      if (all || std::chrono::steady_clock::now() - asked > kPingAnswerSeconds) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::string silent;
    int n_silent = 0;
    for (size_t r = 0; r < n; ++r)
      if (!answered[r]) silent += (n_silent++ ? ", " : "") + std::to_string(r);
    const long wait_s = long(std::chrono::seconds(kPingAnswerSeconds).count());
    const std::string who =
        n_silent == 0   ? std::string("every other rank answered a ping (none died or stopped)")
        : n_silent == 1 ? "rank " + silent + " did not answer a ping within " +
                              std::to_string(wait_s) + " s (it died or hangs)"
                        : "ranks " + silent + " did not answer a ping within " +
                              std::to_string(wait_s) + " s (they died or hang)";
    std::fprintf(stderr,
                 "vela: tensor-parallel rank %d: %s got no answer from the other ranks within "
                 "%.0f s; %s; stopping every rank\n",
                 world_rank_, what, std::chrono::duration<double>(watchdog_).count(), who.c_str());
    std::fflush(stderr);
    std::this_thread::sleep_for(kFailureNoticeSeconds);
    MPI_Abort(comm_, 1);
    std::abort();  // MPI_Abort does not return
  }

  // Point-to-point messages between stages (the commands are broadcasts, which use no tag).
  static constexpr int kStageTag = 7;
  // On ping_comm_: a ping, and its answer.
  static constexpr int kPingTag = 1, kAnswerTag = 2;
  MPI_Comm comm_;
  MPI_Comm stage_comm_ = MPI_COMM_NULL;          // this rank's stage
  MPI_Comm ping_comm_ = MPI_COMM_NULL;           // liveness pings (a duplicate of comm_)
  MPI_Request ping_receive_ = MPI_REQUEST_NULL;  // the next ping (posted once joined)
  int ping_in_ = 0, ping_out_ = 0;
  int32_t local_ranks_;
  // How long a collective call may wait for the other ranks (VELA_TENSOR_PARALLEL_TIMEOUT
  // seconds): well above any pass, so only a dead or stopped rank reaches it.
  std::chrono::duration<double> watchdog_{60.0};
  int world_rank_ = 0, world_size_ = 0;
  int32_t rank_ = 0, size_ = 1, stage_ = 0, n_stages_ = 1;
  bool closed_ = false;
  TensorParallelTraffic traffic_;
  Command last_ = kClose;
  std::vector<int32_t> words_;
  BatchMessage received_;  // decodes words_
  std::vector<char> payload_;
  std::vector<float> parts_;
  std::vector<int> counts_, displs_;
  std::deque<MPI_Request> sends_;  // sends to other stages not yet waited for, oldest first
  // World rank 0: batches whose broadcast is posted and not yet waited for, oldest first (list
  // nodes: their buffers stay unmoved until then), and finished entries kept for reuse.
  struct PostedBatch {
    int64_t header[2] = {0, 0};  // command, payload bytes
    BatchMessage message;        // the encoded batch
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  };
  std::list<PostedBatch> batches_, spare_batches_;
};

std::weak_ptr<MpiTensorGroup> g_group;

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
}

}  // namespace

bool available() {
  return true;
}
bool group_failed() {
  return g_failed;
}

Result<std::shared_ptr<TensorParallel>> join(ParallelSizes sizes,
                                             const std::string& worker_program) {
  const int32_t size = sizes.ranks();
  const std::string n = std::to_string(size);
  const std::string flags =
      "--tensor-parallel-size " + std::to_string(sizes.tensor) +
      (sizes.pipeline > 1 ? " --pipeline-parallel-size " + std::to_string(sizes.pipeline)
                          : std::string());
  if (sizes.tensor < 1 || sizes.pipeline < 1 || size > 256)
    return make_error("the parallel sizes must be at least 1 and at most 256 ranks in all (" +
                      flags + ")");
  if (auto group = g_group.lock()) {
    if (group->size() != sizes.tensor || group->n_stages() != sizes.pipeline)
      return make_error("this process's group is " + std::to_string(group->n_stages()) +
                        " pipeline stages of " + std::to_string(group->size()) +
                        " tensor-parallel ranks, not " + flags);
    return std::shared_ptr<TensorParallel>(group);
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return make_error("MPI was initialised and finalised already in this process");
  const bool launched = launched_by_mpirun();
  if (!launched && worker_program.empty())
    return make_error(flags + " needs " + n + " MPI ranks: run it as mpirun -np " + n +
                      " vela ...");
  // Spawned ranks share this host's cores, however many there are (unless the user set Open
  // MPI's own choice).
  if (!launched) setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return make_error(
        "this MPI library does not let the engine thread call it "
        "(MPI_THREAD_SERIALIZED)");
  }
  MPI_Comm comm = MPI_COMM_WORLD;
  int32_t local_ranks = 1;
  if (launched) {
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != size) {
      MPI_Finalize();
      return make_error(flags + " needs " + n + " ranks, but mpirun started " +
                        std::to_string(world));
    }
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
      if (const char* v = std::getenv(name)) local_ranks = std::max(1, std::atoi(v));
  } else {
    // No launcher: this process spawns the other ranks on this host and becomes rank 0.
    char command[] = "tensor-parallel-worker";
    char* argv[] = {command, nullptr};
    MPI_Comm workers;
    std::vector<int> codes(size_t(size - 1));
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (MPI_Comm_spawn(worker_program.c_str(), argv, size - 1, MPI_INFO_NULL, 0, MPI_COMM_SELF,
                       &workers, codes.data()) != MPI_SUCCESS) {
      MPI_Finalize();
      return make_error("could not start " + std::to_string(size - 1) +
                        " tensor-parallel worker processes of '" + worker_program + "'");
    }
    MPI_Intercomm_merge(workers, 0, &comm);
    MPI_Comm_free(&workers);
    local_ranks = size;
  }
  auto group = std::make_shared<MpiTensorGroup>(comm, local_ranks, sizes);
  g_group = group;
  return std::shared_ptr<TensorParallel>(group);
}

Result<std::shared_ptr<TensorParallel>> join_spawned() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm parent;
  MPI_Comm_get_parent(&parent);
  if (parent == MPI_COMM_NULL) {
    MPI_Finalize();
    return make_error("this process was not started by a tensor-parallel rank 0");
  }
  MPI_Comm comm;
  MPI_Intercomm_merge(parent, 1, &comm);
  MPI_Comm_free(&parent);
  int size = 0;
  MPI_Comm_size(comm, &size);
  auto group = std::make_shared<MpiTensorGroup>(comm, size, ParallelSizes{});
  g_group = group;
  return std::shared_ptr<TensorParallel>(group);
}

int32_t threads_per_rank(int32_t n_threads) {
  if (n_threads > 0) return n_threads;
  const auto group = g_group.lock();
  const int32_t local = group ? group->local_ranks() : 1;
  return std::max(1, cpu_features().physical_cores / local);
}

Status start_workers(TensorParallel& g, const ShardSetup& shard_setup) {
  auto& group = static_cast<MpiTensorGroup&>(g);
  ShardSetup setup = shard_setup;
  auto identity = identify_rank(setup.model_path);
  if (!identity) return identity.error();
  setup.expected = *identity;
  const std::string text = encode_setup(setup);
  group.send(kSetup, text.data(), int64_t(text.size()));
  // Each rank answers with a fixed-size reply (worker_setup.h).
  std::vector<char> replies(kStatusBytes * size_t(group.world_size()));
  std::vector<char> mine(kStatusBytes, '\0');
  MPI_Request request;
  MPI_Igather(mine.data(), int(kStatusBytes), MPI_CHAR, replies.data(), int(kStatusBytes), MPI_CHAR,
              0, group.comm(), &request);
  group.finish(request, "loading the model", false);  // a large model loads for minutes
  for (int32_t r = 1; r < group.world_size(); ++r) {
    const char* reply = replies.data() + kStatusBytes * size_t(r);
    std::string note;
    if (auto st = check_worker_reply(r, std::string(reply, strnlen(reply, kStatusBytes)),
                                     setup.expected, note);
        !st)
      return make_error("parallel " + st.message());
    if (!note.empty()) std::fprintf(stderr, "vela: %s\n", note.c_str());
  }
  return {};
}

int serve_as_worker(const std::shared_ptr<TensorParallel>& g) {
  auto& group = static_cast<MpiTensorGroup&>(*g);
  Command c = group.receive();
  // Each setup builds this rank's part of one engine, which serves passes until rank 0 closes
  // the group or sets up the next engine.
  while (c == kSetup) {
    std::string answer;
    auto worker =
        load_worker(std::string(group.payload().begin(), group.payload().end()), g, answer);
    std::vector<char> reply(kStatusBytes, '\0');
    std::copy_n(answer.data(), std::min(answer.size(), kStatusBytes - 1), reply.data());
    MPI_Request request;
    MPI_Igather(reply.data(), int(kStatusBytes), MPI_CHAR, nullptr, 0, MPI_CHAR, 0, group.comm(),
                &request);
    group.finish(request, "loading the model", false);
    if (!worker) {  // rank 0 reports the error and closes the group
      while (group.receive() != kClose) {
      }
      return 1;
    }
    if (auto st = run_tensor_parallel_worker(worker->forward, worker->cache, *g); !st) {
      std::fprintf(stderr, "vela: %s\n", st.message().c_str());
      MPI_Abort(group.comm(), 1);
    }
    c = group.last_command();
  }
  return 0;
}

}  // namespace vela::dist
