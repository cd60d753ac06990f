#include "io/gguf.h"

#include <cstring>
#include <limits>
#include <sstream>

namespace vela {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kMaxDims = 4;

// Sequential reader over the file image with bounds checks on every read.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

  template <class T>
  bool read(T& out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(&out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool read_string(std::string_view& out) {
    uint64_t len = 0;
    if (!read(len) || len > remaining()) return false;
    out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

// Smallest number of bytes one element of this type occupies in the file; 0 if unknown.
uint64_t min_encoded_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
      return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32:
      return 4;
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
    case GgufValueType::FLOAT64:
    case GgufValueType::STRING:
      return 8;  // a string is at least its length field
    case GgufValueType::ARRAY:
      return 12;  // element type + count
  }
  return 0;
}

template <class T>
bool read_int_value(Cursor& c, GgufValue& v) {
  T x;
  if (!c.read(x)) return false;
  if constexpr (std::is_signed_v<T>) {
    v.i64 = x;
    v.u64 = x >= 0 ? static_cast<uint64_t>(x) : 0;
  } else {
    v.u64 = x;
    v.i64 = x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                ? static_cast<int64_t>(x)
                : 0;
  }
  return true;
}

Status read_value(Cursor& c, GgufValueType type, GgufValue& v, int depth, const std::string& what) {
  v.type = type;
  const auto truncated = [&] { return make_error("truncated file while reading " + what); };
  switch (type) {
    case GgufValueType::UINT8:
      return read_int_value<uint8_t>(c, v) ? Status{} : truncated();
    case GgufValueType::INT8:
      return read_int_value<int8_t>(c, v) ? Status{} : truncated();
    case GgufValueType::UINT16:
      return read_int_value<uint16_t>(c, v) ? Status{} : truncated();
    case GgufValueType::INT16:
      return read_int_value<int16_t>(c, v) ? Status{} : truncated();
    case GgufValueType::UINT32:
      return read_int_value<uint32_t>(c, v) ? Status{} : truncated();
    case GgufValueType::INT32:
      return read_int_value<int32_t>(c, v) ? Status{} : truncated();
    case GgufValueType::UINT64:
      return read_int_value<uint64_t>(c, v) ? Status{} : truncated();
    case GgufValueType::INT64:
      return read_int_value<int64_t>(c, v) ? Status{} : truncated();
    case GgufValueType::FLOAT32: {
      float f;
      if (!c.read(f)) return truncated();
      v.f64 = f;
      return {};
    }
    case GgufValueType::FLOAT64:
      return c.read(v.f64) ? Status{} : truncated();
    case GgufValueType::BOOL: {
      uint8_t b;
      if (!c.read(b)) return truncated();
      if (b > 1) return make_error("invalid bool value " + std::to_string(b) + " in " + what);
      v.u64 = b;
      v.i64 = b;
      return {};
    }
    case GgufValueType::STRING:
      return c.read_string(v.str) ? Status{} : truncated();
    case GgufValueType::ARRAY: {
      if (depth >= kMaxArrayDepth) return make_error("arrays nested too deeply in " + what);
      uint32_t elem_type_raw;
      uint64_t count;
      if (!c.read(elem_type_raw) || !c.read(count)) return truncated();
      const auto elem_type = static_cast<GgufValueType>(elem_type_raw);
      const uint64_t elem_min = min_encoded_size(elem_type);
      if (elem_min == 0)
        return make_error("invalid array element type " + std::to_string(elem_type_raw) + " in " +
                          what);
      // A count the remaining bytes cannot hold is rejected before anything is allocated.
      if (count > c.remaining() / elem_min)
        return make_error("array of " + std::to_string(count) + " elements in " + what +
                          " exceeds the file size");
      auto array = std::make_shared<GgufArray>();
      array->elem_type = elem_type;
      array->items.resize(count);
      for (uint64_t i = 0; i < count; ++i) {
        if (auto st = read_value(c, elem_type, array->items[i], depth + 1, what); !st) return st;
      }
      v.array = std::move(array);
      return {};
    }
  }
  return make_error("invalid value type " + std::to_string(static_cast<uint32_t>(type)) + " in " +
                    what);
}

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8:
      return "u8";
    case GgufValueType::INT8:
      return "i8";
    case GgufValueType::UINT16:
      return "u16";
    case GgufValueType::INT16:
      return "i16";
    case GgufValueType::UINT32:
      return "u32";
    case GgufValueType::INT32:
      return "i32";
    case GgufValueType::FLOAT32:
      return "f32";
    case GgufValueType::BOOL:
      return "bool";
    case GgufValueType::STRING:
      return "str";
    case GgufValueType::ARRAY:
      return "arr";
    case GgufValueType::UINT64:
      return "u64";
    case GgufValueType::INT64:
      return "i64";
    case GgufValueType::FLOAT64:
      return "f64";
  }
  return "?";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
      return true;
    default:
      return false;
  }
}

std::string GgufValue::to_string(size_t max_items) const {
  std::ostringstream out;
  switch (type) {
    case GgufValueType::STRING: {
      std::string s(str.substr(0, 200));
      for (char& ch : s)
        if (ch == '\n') ch = ' ';
      out << '"' << s << (str.size() > 200 ? "\"..." : "\"");
      break;
    }
    case GgufValueType::BOOL:
      out << (u64 ? "true" : "false");
      break;
    case GgufValueType::FLOAT32:
    case GgufValueType::FLOAT64:
      out << f64;
      break;
    case GgufValueType::INT8:
    case GgufValueType::INT16:
    case GgufValueType::INT32:
    case GgufValueType::INT64:
      out << i64;
      break;
    case GgufValueType::ARRAY: {
      out << "[" << gguf_value_type_name(array->elem_type) << " x " << array->items.size() << "] [";
      for (size_t i = 0; i < array->items.size() && i < max_items; ++i)
        out << (i ? ", " : "") << array->items[i].to_string(max_items);
      if (array->items.size() > max_items) out << ", ...";
      out << "]";
      break;
    }
    default:
      out << u64;
      break;
  }
  return out.str();
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto mapping = MappedFile::open(path);
  if (!mapping) return mapping.error();
  GgufFile file;
  file.mapping_ = std::move(*mapping);
  file.bytes_ = file.mapping_.bytes();
  auto parsed = parse(std::move(file));
  if (!parsed) return make_error("'" + path + "': " + parsed.message());
  return parsed;
}

Result<GgufFile> GgufFile::from_bytes(std::span<const uint8_t> bytes) {
  GgufFile file;
  file.owned_.assign(bytes.begin(), bytes.end());
  file.bytes_ = std::span<const uint8_t>(file.owned_.data(), file.owned_.size());
  return parse(std::move(file));
}

Result<GgufFile> GgufFile::parse(GgufFile f) {
  Cursor c(f.bytes_);
  uint32_t magic = 0;
  if (!c.read(magic) || magic != kMagic) return make_error("not a GGUF file (bad magic)");
  if (!c.read(f.version_)) return make_error("truncated GGUF header");
  if (f.version_ != 2 && f.version_ != 3)
    return make_error("unsupported GGUF version " + std::to_string(f.version_) +
                      " (supported: 2, 3)");
  uint64_t n_tensors = 0, n_kv = 0;
  if (!c.read(n_tensors) || !c.read(n_kv)) return make_error("truncated GGUF header");
  // Each key/value takes at least 12 bytes, each tensor info at least 24.
  if (n_kv > c.remaining() / 12)
    return make_error("metadata count " + std::to_string(n_kv) + " exceeds the file size");
  if (n_tensors > c.remaining() / 24)
    return make_error("tensor count " + std::to_string(n_tensors) + " exceeds the file size");

  f.kv_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string_view key;
    if (!c.read_string(key))
      return make_error("truncated file while reading metadata key #" + std::to_string(i));
    uint32_t type_raw;
    if (!c.read(type_raw))
      return make_error("truncated file while reading metadata '" + std::string(key) + "'");
    GgufValue value;
    if (auto st = read_value(c, static_cast<GgufValueType>(type_raw), value, 0,
                             "metadata '" + std::string(key) + "'");
        !st)
      return st.error();
    if (f.kv_index_.count(key))
      return make_error("duplicate metadata key '" + std::string(key) + "'");
    f.kv_index_.emplace(key, f.kv_.size());
    f.kv_.emplace_back(key, std::move(value));
  }

  if (const GgufValue* a = f.find("general.alignment")) {
    // At least 8 (the format asks for a multiple of 8): every tensor then starts where its
    // elements and blocks can be read in place.
    if (!a->is_integer() || a->u64 < 8 || (a->u64 & (a->u64 - 1)) != 0 || a->u64 > (1u << 20))
      return make_error("general.alignment must be a power of two from 8 to 1 MiB");
    f.alignment_ = a->u64;
  }

  f.tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    const std::string where = "tensor info #" + std::to_string(i);
    if (!c.read_string(t.name)) return make_error("truncated file while reading " + where);
    const std::string name(t.name);
    if (!c.read(t.n_dims)) return make_error("truncated file while reading tensor '" + name + "'");
    if (t.n_dims == 0 || t.n_dims > kMaxDims)
      return make_error("tensor '" + name + "' has " + std::to_string(t.n_dims) +
                        " dimensions (1 to 4 allowed)");
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      uint64_t ne;
      if (!c.read(ne)) return make_error("truncated file while reading tensor '" + name + "'");
      if (ne == 0 || ne > (uint64_t(1) << 40))
        return make_error("tensor '" + name + "' has invalid dimension " + std::to_string(ne));
      t.ne[d] = static_cast<int64_t>(ne);
    }
    if (!c.read(t.type) || !c.read(t.offset))
      return make_error("truncated file while reading tensor '" + name + "'");
    // Integer tensors (an EAGLE-3 head's d2t ids) are data, not weights: one element per block.
    const auto integer_size = [](uint32_t type) -> int64_t {
      switch (static_cast<GgmlType>(type)) {
        case GgmlType::I8:
          return 1;
        case GgmlType::I16:
          return 2;
        case GgmlType::I32:
          return 4;
        case GgmlType::I64:
          return 8;
        default:
          return 0;
      }
    };
    const int64_t int_size = integer_size(t.type);
    if (!is_supported_weight_type(t.type) && int_size == 0)
      return make_error("unsupported tensor type " + ggml_type_name(t.type) + " in tensor '" +
                        name + "'");
    const GgmlTypeInfo info =
        int_size > 0 ? GgmlTypeInfo{"integer", 1, int_size} : *ggml_type_info(t.type);
    // Element count with overflow checks: each dim <= 2^40, product must stay < 2^62.
    uint64_t n = 1;
    for (int d = 0; d < 4; ++d) {
      if (n > (uint64_t(1) << 62) / static_cast<uint64_t>(t.ne[d]))
        return make_error("tensor '" + name + "' is too large");
      n *= static_cast<uint64_t>(t.ne[d]);
    }
    if (t.ne[0] % info.block_size != 0)
      return make_error("tensor '" + name + "' row length " + std::to_string(t.ne[0]) +
                        " is not a multiple of the " + std::string(info.name) + " block size " +
                        std::to_string(info.block_size));
    t.n_bytes = n / info.block_size * info.type_size;
    if (f.tensor_index_.count(t.name)) return make_error("duplicate tensor name '" + name + "'");
    f.tensor_index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(t);
  }

  f.data_offset_ = align_up(c.pos(), f.alignment_);
  const uint64_t file_size = f.bytes_.size();
  if (!f.tensors_.empty() && f.data_offset_ > file_size)
    return make_error("tensor data section starts past the end of the file");
  for (GgufTensorInfo& t : f.tensors_) {
    const std::string name(t.name);
    if (t.offset % f.alignment_ != 0)
      return make_error("tensor '" + name + "' data offset " + std::to_string(t.offset) +
                        " is not aligned to " + std::to_string(f.alignment_));
    if (t.offset > file_size - f.data_offset_ || t.n_bytes > file_size - f.data_offset_ - t.offset)
      return make_error("tensor '" + name + "' data (offset " + std::to_string(t.offset) + ", " +
                        std::to_string(t.n_bytes) + " bytes) extends past the end of the file");
    t.data = f.bytes_.data() + f.data_offset_ + t.offset;
  }
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
Error wrong_type(std::string_view key, std::string_view want, const GgufValue& v) {
  return make_error("metadata '" + std::string(key) + "' should be " + std::string(want) +
                    ", found " + std::string(gguf_value_type_name(v.type)));
}
}  // namespace

Result<std::optional<std::string_view>> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<std::string_view>{};
  if (v->type != GgufValueType::STRING) return wrong_type(key, "a string", *v);
  return std::optional<std::string_view>{v->str};
}

Result<std::optional<uint64_t>> GgufFile::get_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<uint64_t>{};
  if (!v->is_integer()) return wrong_type(key, "an integer", *v);
  if (v->i64 < 0 && v->u64 == 0)
    return make_error("metadata '" + std::string(key) + "' must not be negative");
  return std::optional<uint64_t>{v->u64};
}

Result<std::optional<int64_t>> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<int64_t>{};
  if (!v->is_integer()) return wrong_type(key, "an integer", *v);
  if (v->type == GgufValueType::UINT64 && v->u64 > uint64_t(std::numeric_limits<int64_t>::max()))
    return make_error("metadata '" + std::string(key) + "' is out of range");
  return std::optional<int64_t>{v->i64};
}

Result<std::optional<double>> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<double>{};
  if (v->is_float()) return std::optional<double>{v->f64};
  if (v->is_integer())
    return std::optional<double>{v->type == GgufValueType::UINT64 ? double(v->u64)
                                                                  : double(v->i64)};
  return wrong_type(key, "a number", *v);
}

Result<std::optional<bool>> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<bool>{};
  if (v->type != GgufValueType::BOOL) return wrong_type(key, "a bool", *v);
  return std::optional<bool>{v->u64 != 0};
}

Result<std::optional<const GgufArray*>> GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<const GgufArray*>{};
  if (v->type != GgufValueType::ARRAY) return wrong_type(key, "an array", *v);
  return std::optional<const GgufArray*>{v->array.get()};
}

Result<std::vector<std::string_view>> gguf_array_strings(const GgufArray& array) {
  if (array.elem_type != GgufValueType::STRING) return make_error("expected an array of strings");
  std::vector<std::string_view> out;
  out.reserve(array.items.size());
  for (const GgufValue& v : array.items) out.push_back(v.str);
  return out;
}

Result<std::vector<float>> gguf_array_floats(const GgufArray& array) {
  std::vector<float> out;
  out.reserve(array.items.size());
  for (const GgufValue& v : array.items) {
    if (v.is_float())
      out.push_back(static_cast<float>(v.f64));
    else if (v.is_integer())
      out.push_back(static_cast<float>(v.i64));
    else
      return make_error("expected an array of numbers");
  }
  return out;
}

Result<std::vector<int64_t>> gguf_array_ints(const GgufArray& array) {
  std::vector<int64_t> out;
  out.reserve(array.items.size());
  for (const GgufValue& v : array.items) {
    if (!v.is_integer()) return make_error("expected an array of integers");
    out.push_back(v.i64);
  }
  return out;
}

}  // namespace vela
