#include "tools_support/gguf_stream_writer.h"

#include <cstring>
#include <filesystem>

namespace vela {
namespace {

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

}  // namespace

GgufStreamWriter::~GgufStreamWriter() {
  if (file_ && !finished_) {
    file_.reset();
    std::error_code ec;
    std::filesystem::remove(path_ + ".part", ec);
  }
}

Status GgufStreamWriter::add_tensor(std::string_view name, GgmlType type,
                                    std::span<const int64_t> ne) {
  if (file_)
    return make_error("tensor '" + std::string(name) + "' declared after the header was written");
  auto info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info)
    return make_error("cannot write tensor '" + std::string(name) + "' of unsupported type");
  if (ne.empty() || ne.size() > 4)
    return make_error("tensor '" + std::string(name) + "' needs 1 to 4 dimensions");
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d <= 0)
      return make_error("tensor '" + std::string(name) + "' has a non-positive dimension");
    n *= d;
  }
  if (ne[0] % info->block_size != 0)
    return make_error("tensor '" + std::string(name) + "': row length " + std::to_string(ne[0]) +
                      " is not a multiple of " + ggml_type_name(uint32_t(type)) + "'s block size " +
                      std::to_string(info->block_size));
  Tensor t{std::string(name),
           type,
           {ne.begin(), ne.end()},
           uint64_t(n / info->block_size * info->type_size),
           data_bytes_};
  data_bytes_ += align_up(t.n_bytes, kAlignment);
  tensors_.push_back(std::move(t));
  return {};
}

uint64_t GgufStreamWriter::header_bytes() const {
  uint64_t n = 4 + 4 + 8 + 8 + kv_bytes().size();
  for (const Tensor& t : tensors_) n += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
  return n;
}

uint64_t GgufStreamWriter::total_bytes() const {
  return align_up(header_bytes(), kAlignment) + data_bytes_;
}

Status GgufStreamWriter::put(const void* data, size_t n) {
  if (n && std::fwrite(data, 1, n, file_.get()) != n)
    return make_error("cannot write '" + path_ + "' (disk full?)");
  pos_ += n;
  return {};
}

Status GgufStreamWriter::pad_to(uint64_t file_pos) {
  static const uint8_t zeros[kAlignment] = {};
  while (pos_ < file_pos) {
    const size_t n = size_t(std::min<uint64_t>(file_pos - pos_, kAlignment));
    if (auto st = put(zeros, n); !st) return st;
  }
  return {};
}

Status GgufStreamWriter::open(const std::string& path) {
  if (file_) return make_error("GGUF writer already opened");
  path_ = path;
  file_.reset(std::fopen((path + ".part").c_str(), "wb"));
  if (!file_) return make_error("cannot create '" + path + ".part'");
  file_buffer_.resize(size_t(4) << 20);  // large writes: fewer syscalls for multi-GiB files
  std::setvbuf(file_.get(), file_buffer_.data(), _IOFBF, file_buffer_.size());

  // Filled in place (its size is known): GCC 12 misreports growing a vector here.
  std::vector<uint8_t> h(static_cast<size_t>(header_bytes()));
  size_t at = 0;
  const auto append = [&h, &at](const void* p, size_t n) {
    if (n) std::memcpy(h.data() + at, p, n);
    at += n;
  };
  const auto u32 = [&](uint32_t v) { append(&v, 4); };
  const auto u64 = [&](uint64_t v) { append(&v, 8); };
  u32(0x46554747);  // "GGUF"
  u32(3);
  u64(tensors_.size());
  u64(n_kv());
  append(kv_bytes().data(), kv_bytes().size());
  for (const Tensor& t : tensors_) {
    u64(t.name.size());
    append(t.name.data(), t.name.size());
    u32(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) u64(static_cast<uint64_t>(d));
    u32(static_cast<uint32_t>(t.type));
    u64(t.offset);
  }
  if (auto st = put(h.data(), h.size()); !st) return st;
  data_start_ = align_up(pos_, kAlignment);
  if (auto st = pad_to(data_start_); !st) return st;
  current_ = 0;
  current_written_ = 0;
  return {};
}

Status GgufStreamWriter::write(std::span<const uint8_t> bytes) {
  if (!file_) return make_error("GGUF writer is not open");
  while (!bytes.empty()) {
    if (current_ >= tensors_.size())
      return make_error("more tensor data than declared for '" + path_ + "'");
    const Tensor& t = tensors_[current_];
    const size_t n = size_t(std::min<uint64_t>(bytes.size(), t.n_bytes - current_written_));
    if (auto st = put(bytes.data(), n); !st) return st;
    bytes = bytes.subspan(n);
    current_written_ += n;
    if (current_written_ == t.n_bytes) {
      ++current_;
      current_written_ = 0;
      const uint64_t next = current_ < tensors_.size() ? data_start_ + tensors_[current_].offset
                                                       : data_start_ + data_bytes_;
      if (auto st = pad_to(next); !st) return st;
    }
  }
  return {};
}

Status GgufStreamWriter::finish() {
  if (!file_) return make_error("GGUF writer is not open");
  // Zero-byte tensors cannot exist (dimensions are positive), so current_ counts complete ones.
  if (current_ != tensors_.size())
    return make_error("tensor '" + tensors_[current_].name + "' was not written completely");
  if (std::fflush(file_.get()) != 0) return make_error("cannot write '" + path_ + "' (disk full?)");
  file_.reset();
  std::error_code ec;
  std::filesystem::rename(path_ + ".part", path_, ec);
  if (ec) {
    std::filesystem::remove(path_ + ".part", ec);
    return make_error("cannot rename '" + path_ + ".part' to '" + path_ + "'");
  }
  finished_ = true;
  return {};
}

}  // namespace vela
