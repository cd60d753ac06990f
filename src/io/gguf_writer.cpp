#include "io/gguf_writer.h"

#include <cstdio>
#include <memory>

namespace vela {

GgufEncoder& GgufEncoder::str(std::string_view s) {
  pod<uint64_t>(s.size());
  bytes.insert(bytes.end(), s.begin(), s.end());
  return *this;
}

GgufEncoder& GgufEncoder::array_header(GgufValueType elem_type, uint64_t count) {
  return pod<uint32_t>(static_cast<uint32_t>(elem_type)).pod<uint64_t>(count);
}

GgufEncoder& GgufEncoder::value(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::UINT8: return pod<uint8_t>(uint8_t(v.u64));
    case GgufValueType::INT8: return pod<int8_t>(int8_t(v.i64));
    case GgufValueType::UINT16: return pod<uint16_t>(uint16_t(v.u64));
    case GgufValueType::INT16: return pod<int16_t>(int16_t(v.i64));
    case GgufValueType::UINT32: return pod<uint32_t>(uint32_t(v.u64));
    case GgufValueType::INT32: return pod<int32_t>(int32_t(v.i64));
    case GgufValueType::UINT64: return pod<uint64_t>(v.u64);
    case GgufValueType::INT64: return pod<int64_t>(v.i64);
    case GgufValueType::FLOAT32: return pod<float>(float(v.f64));
    case GgufValueType::FLOAT64: return pod<double>(v.f64);
    case GgufValueType::BOOL: return pod<uint8_t>(v.u64 ? 1 : 0);
    case GgufValueType::STRING: return str(v.str);
    case GgufValueType::ARRAY:
      array_header(v.array->elem_type, v.array->items.size());
      for (const GgufValue& item : v.array->items) value(item);
      return *this;
  }
  return *this;
}

void GgufMetadataWriter::add_value(std::string_view k, const GgufValue& v) {
  key(k, v.type);
  kv_.value(v);
}

void GgufMetadataWriter::key(std::string_view k, GgufValueType type) {
  kv_.str(k).pod<uint32_t>(static_cast<uint32_t>(type));
  ++n_kv_;
}

void GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  if (alignment != 32) add_u32("general.alignment", alignment);
}

void GgufMetadataWriter::add_string(std::string_view k, std::string_view v) {
  key(k, GgufValueType::STRING);
  kv_.str(v);
}
void GgufMetadataWriter::add_bool(std::string_view k, bool v) {
  key(k, GgufValueType::BOOL);
  kv_.pod<uint8_t>(v ? 1 : 0);
}
void GgufMetadataWriter::add_u32(std::string_view k, uint32_t v) {
  key(k, GgufValueType::UINT32);
  kv_.pod(v);
}
void GgufMetadataWriter::add_i32(std::string_view k, int32_t v) {
  key(k, GgufValueType::INT32);
  kv_.pod(v);
}
void GgufMetadataWriter::add_u64(std::string_view k, uint64_t v) {
  key(k, GgufValueType::UINT64);
  kv_.pod(v);
}
void GgufMetadataWriter::add_f32(std::string_view k, float v) {
  key(k, GgufValueType::FLOAT32);
  kv_.pod(v);
}
void GgufMetadataWriter::add_strings(std::string_view k, std::span<const std::string> values) {
  key(k, GgufValueType::ARRAY);
  kv_.array_header(GgufValueType::STRING, values.size());
  for (const auto& s : values) kv_.str(s);
}
void GgufMetadataWriter::add_f32s(std::string_view k, std::span<const float> values) {
  key(k, GgufValueType::ARRAY);
  kv_.array_header(GgufValueType::FLOAT32, values.size());
  for (float f : values) kv_.pod(f);
}
void GgufMetadataWriter::add_i32s(std::string_view k, std::span<const int32_t> values) {
  key(k, GgufValueType::ARRAY);
  kv_.array_header(GgufValueType::INT32, values.size());
  for (int32_t v : values) kv_.pod(v);
}
void GgufMetadataWriter::add_raw(std::string_view k, GgufValueType type, std::span<const uint8_t> encoded) {
  key(k, type);
  kv_.bytes.insert(kv_.bytes.end(), encoded.begin(), encoded.end());
}

Status GgufWriter::add_tensor(std::string_view name, GgmlType type, std::span<const int64_t> ne,
                              std::span<const uint8_t> data) {
  auto info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info) return make_error("cannot write tensor '" + std::string(name) + "' of unsupported type");
  if (ne.empty() || ne.size() > 4) return make_error("tensor '" + std::string(name) + "' needs 1 to 4 dimensions");
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  if (ne[0] % info->block_size != 0 || uint64_t(n / info->block_size * info->type_size) != data.size())
    return make_error("tensor '" + std::string(name) + "' data size does not match its shape and type");
  tensors_.push_back(Tensor{std::string(name), type, {ne.begin(), ne.end()}, {data.begin(), data.end()}});
  return {};
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  GgufEncoder out;
  out.pod<uint32_t>(0x46554747).pod<uint32_t>(version_).pod<uint64_t>(tensors_.size()).pod<uint64_t>(n_kv());
  out.bytes.insert(out.bytes.end(), kv_bytes().begin(), kv_bytes().end());
  const auto pad = [&](std::vector<uint8_t>& b) {
    while (b.size() % alignment_ != 0) b.push_back(0);
  };
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    out.str(t.name).pod<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) out.pod<uint64_t>(static_cast<uint64_t>(d));
    out.pod<uint32_t>(static_cast<uint32_t>(t.type)).pod<uint64_t>(offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  pad(out.bytes);
  for (const Tensor& t : tensors_) {
    out.bytes.insert(out.bytes.end(), t.data.begin(), t.data.end());
    pad(out.bytes);
  }
  return std::move(out.bytes);
}

Status GgufWriter::write_file(const std::string& path) const {
  const std::vector<uint8_t> bytes = to_bytes();
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return make_error("cannot create '" + path + "'");
  if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    return make_error("cannot write '" + path + "'");
  return {};
}

}  // namespace vela
