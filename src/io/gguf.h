#pragma once
// GGUF reader (format versions 2 and 3). The file is memory-mapped: tensor data and metadata
// strings are views into the mapping, never copied. Every count, size and offset read from the
// file is checked against the file's size before it is used, so a hostile file yields an error,
// never a crash or a huge allocation.
// Thread-safety: a GgufFile is immutable after open(); concurrent reads are safe.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"
#include "quant/ggml_type.h"
#include "util/result.h"

namespace vela {

enum class GgufValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

std::string_view gguf_value_type_name(GgufValueType type);

struct GgufValue;

struct GgufArray {
  GgufValueType elem_type = GgufValueType::UINT8;
  std::vector<GgufValue> items;
};

struct GgufValue {
  GgufValueType type = GgufValueType::UINT8;
  // Exactly one of these is meaningful, by type: integers in i64 or u64 (both filled when the
  // value fits), floats in f64, BOOL in u64 (0/1), STRING in str, ARRAY in array.
  int64_t i64 = 0;
  uint64_t u64 = 0;
  double f64 = 0;
  std::string_view str;
  std::shared_ptr<GgufArray> array;

  bool is_integer() const;
  bool is_float() const { return type == GgufValueType::FLOAT32 || type == GgufValueType::FLOAT64; }
  std::string to_string(size_t max_items = 8) const;  // for `vela info`
};

struct GgufTensorInfo {
  std::string_view name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};   // ne[0] is the innermost (row length)
  uint32_t type = 0;              // GgmlType number
  uint64_t offset = 0;            // relative to the start of the data section
  const uint8_t* data = nullptr;  // into the mapping
  uint64_t n_bytes = 0;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  GgmlType ggml_type() const { return static_cast<GgmlType>(type); }
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);
  // Parses an in-memory image (the bytes are copied into the object); used by tests.
  static Result<GgufFile> from_bytes(std::span<const uint8_t> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  size_t file_size() const { return bytes_.size(); }
  // The header, metadata and tensor index: every byte before the tensor data.
  std::span<const uint8_t> header_bytes() const {
    return bytes_.first(std::min<size_t>(data_offset_, bytes_.size()));
  }
  // True when the bytes are a read-only file mapping (open()), whose pages may be dropped and
  // read again from the file; false for from_bytes() images.
  bool memory_mapped() const { return owned_.empty(); }

  // Metadata in file order.
  const std::vector<std::pair<std::string_view, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;

  // Typed accessors: nullopt when the key is absent; an error when present with the wrong type.
  Result<std::optional<std::string_view>> get_string(std::string_view key) const;
  Result<std::optional<uint64_t>> get_uint(std::string_view key) const;  // any non-negative int
  Result<std::optional<int64_t>> get_int(std::string_view key) const;
  Result<std::optional<double>> get_float(std::string_view key) const;  // float or int
  Result<std::optional<bool>> get_bool(std::string_view key) const;
  Result<std::optional<const GgufArray*>> get_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  static Result<GgufFile> parse(GgufFile file);

  MappedFile mapping_;
  std::vector<uint8_t> owned_;  // only for from_bytes()
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, GgufValue>> kv_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

// Helpers converting a metadata array to a flat vector; error if an element has the wrong type.
Result<std::vector<std::string_view>> gguf_array_strings(const GgufArray& array);
Result<std::vector<float>> gguf_array_floats(const GgufArray& array);
Result<std::vector<int64_t>> gguf_array_ints(const GgufArray& array);

}  // namespace vela
