#pragma once
// Writes GGUF files (versions 2 and 3): metadata of every value type and tensors of any type.
// Used by `vela synth`/`vela quantize` and by tests that build files, including broken ones.
// Thread-safety: not synchronised; one writer per thread.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"
#include "quant/ggml_type.h"
#include "util/result.h"

namespace vela {

// Encodes GGUF values (the bytes that follow a key's type tag) for building arrays by hand.
class GgufEncoder {
 public:
  template <class T>
  GgufEncoder& pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
    return *this;
  }
  GgufEncoder& str(std::string_view s);
  // Array header: element type and count; the caller then encodes `count` elements.
  GgufEncoder& array_header(GgufValueType elem_type, uint64_t count);
  // A value read from another file, arrays and nesting included (without its type tag).
  GgufEncoder& value(const GgufValue& v);

  std::vector<uint8_t> bytes;
};

// The metadata part of a GGUF file: key/value pairs in file order, encoded as they are added.
// Shared by GgufWriter (whole file in memory) and GgufStreamWriter (tensors streamed).
class GgufMetadataWriter {
 public:
  void add_string(std::string_view key, std::string_view value);
  void add_bool(std::string_view key, bool value);
  void add_u32(std::string_view key, uint32_t value);
  void add_i32(std::string_view key, int32_t value);
  void add_u64(std::string_view key, uint64_t value);
  void add_f32(std::string_view key, float value);
  void add_strings(std::string_view key, std::span<const std::string> values);
  void add_f32s(std::string_view key, std::span<const float> values);
  void add_i32s(std::string_view key, std::span<const int32_t> values);
  // A value read from another file (copies metadata such as a tokenizer between files).
  void add_value(std::string_view key, const GgufValue& value);
  // Any value: its type tag and its already-encoded bytes.
  void add_raw(std::string_view key, GgufValueType type, std::span<const uint8_t> encoded);

  uint64_t n_kv() const { return n_kv_; }
  const std::vector<uint8_t>& kv_bytes() const { return kv_.bytes; }  // the encoded pairs

 private:
  void key(std::string_view k, GgufValueType type);

  uint64_t n_kv_ = 0;
  GgufEncoder kv_;
};

class GgufWriter : public GgufMetadataWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  void set_alignment(uint32_t alignment);  // also writes general.alignment when not 32

  // ne[0] is the row length. data: the tensor's bytes in `type` (size checked against the shape).
  Status add_tensor(std::string_view name, GgmlType type, std::span<const int64_t> ne, std::span<const uint8_t> data);

  std::vector<uint8_t> to_bytes() const;
  Status write_file(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };

  uint32_t version_;
  uint32_t alignment_ = 32;
  std::vector<Tensor> tensors_;
};

}  // namespace vela
