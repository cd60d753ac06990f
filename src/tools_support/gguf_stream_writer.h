#pragma once
// Writes a GGUF (version 3) file without holding its tensors in memory: metadata and every
// tensor's name, type and shape are declared first, so the header with each tensor's offset
// can be written up front; then tensor data is appended in declaration order, in pieces of any
// size. Lets `vela synth` / `vela quantize` write multi-GiB models with a few MiB of buffers.
// The file is written under PATH.part and renamed to PATH by finish(), so a failed or abandoned
// write never leaves a truncated model behind.
// Thread-safety: not synchronised; one writer is used by one thread at a time.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "quant/ggml_type.h"
#include "util/result.h"

namespace vela {

class GgufStreamWriter : public GgufMetadataWriter {
 public:
  GgufStreamWriter() = default;
  ~GgufStreamWriter();  // removes PATH.part if finish() was not reached
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;

  // Metadata: the add_* of GgufMetadataWriter, in file order, before open().

  // Declares the next tensor (before open()). ne[0] is the row length; it must be a multiple
  // of the type's block size.
  Status add_tensor(std::string_view name, GgmlType type, std::span<const int64_t> ne);

  // Creates PATH.part and writes the header, metadata and tensor table.
  Status open(const std::string& path);
  // Appends bytes of the current tensor; a tensor may be written in any number of pieces, and
  // the writer moves to the next one (after alignment padding) once a tensor is complete.
  Status write(std::span<const uint8_t> bytes);
  // Checks that every tensor was written completely, closes and renames PATH.part to PATH.
  Status finish();

  size_t n_tensors() const { return tensors_.size(); }
  uint64_t total_bytes() const;  // final file size (valid once all tensors are declared)

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t n_bytes = 0;
    uint64_t offset = 0;  // relative to the data section
  };
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  Status put(const void* data, size_t n);
  Status pad_to(uint64_t file_pos);
  uint64_t header_bytes() const;

  static constexpr uint64_t kAlignment = 32;
  std::vector<Tensor> tensors_;
  uint64_t data_bytes_ = 0;  // aligned size of the data section so far

  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::vector<char> file_buffer_;
  uint64_t pos_ = 0;         // bytes written to the file
  uint64_t data_start_ = 0;  // file position of the data section
  size_t current_ = 0;       // tensor being written
  uint64_t current_written_ = 0;
  bool finished_ = false;
};

}  // namespace vela
